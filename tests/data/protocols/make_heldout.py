"""Writes heldout_<lang>.jsonl: reference/prediction pairs for checking scoring conventions.

The sentences are our own. Each template has slots with several ways of writing the same thing
(2024年 / 二零二四年, 1/3 / 三分之一, $5.20 / five dollars and twenty cents, well-known / well
known, B.B.C. / B B C …); a reference takes one way, its prediction another (or the same), and
some predictions get word or character errors on top. Seeded: the files are reproducible.

    python tests/data/protocols/make_heldout.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent

ZH = [
    ("今天是{date}，我们在{place}开会。", {}),
    ("这件衣服{price}，比上次贵了{pct}。", {}),
    ("我们已经完成了{frac}的工作，剩下的{when}做完。", {}),
    ("请拨打{phone}联系{who}。", {}),
    ("他一口气买了{count}{measure}{thing}。", {}),
    ("{cs}", {}),
    ("{trad}", {}),
    ("{punct}", {}),
    ("第{rank}名的同学拿到了{price}奖金。", {}),
    ("{year}的人口大约是{big}人。", {}),
    ("温度从{temp}降到了零下{temp}度。", {}),
    ("{cs}，大概需要{count}{measure}时间。", {}),
]
ZH_SLOTS = {
    "date": [["2024年3月5日", "二零二四年三月五日", "2024年3月5号", "二〇二四年三月五日"], ["1998年12月", "一九九八年十二月", "98年12月"],
             ["3月15号", "三月十五号", "3月15日"], ["2008年", "二零零八年", "两千零八年"], ["10月1日", "十月一日", "国庆节"]],
    "place": [["北京", "北京"], ["上海", "上海"], ["會議室", "会议室"], ["深圳湾", "深圳湾"], ["杭州西湖边", "杭州 西湖边"]],
    "price": [["128元", "一百二十八元", "128块"], ["3块5", "三块五", "3.5元"], ["1.5万元", "一点五万元", "15000元"],
              ["99.9元", "九十九点九元"], ["两百块", "200块", "二百块"], ["15元钱", "十五元钱", "十五块钱"], ["¥50", "五十元"]],
    "pct": [["50%", "百分之五十", "５０％"], ["12.5%", "百分之十二点五"], ["百分之三十", "30%"], ["1/4", "四分之一", "25%"]],
    "frac": [["1/3", "三分之一"], ["2/5", "五分之二"], ["3/4", "四分之三", "75%"], ["一半", "1/2", "二分之一"]],
    "when": [["明天", "明天"], ["下周一", "下周 一"], ["3天后", "三天后"], ["月底", "月底之前"]],
    "phone": [["13812345678", "一三八一二三四五六七八"], ["010-62345678", "零一零六二三四五六七八"],
              ["+86 13912345678", "八六一三九一二三四五六七八"], ["4008123456", "四零零八一二三四五六"], ["110", "幺幺零", "一一零"]],
    "who": [["我", "我"], ["客服", "客 服"], ["王经理", "王 经理"], ["他們", "他们"]],
    "count": [["3", "三"], ["12", "十二"], ["250", "二百五十", "两百五十"], ["2", "两", "二"], ["1000", "一千"], ["20", "二十"]],
    "measure": [["个", "个"], ["斤", "斤"], ["箱", "箱"], ["天", "天"], ["小时", "小时"]],
    "thing": [["苹果", "苹果"], ["蘋果", "苹果"], ["书", "書"], ["矿泉水", "矿泉水"]],
    "cs": [["我们用Python写代码", "我们用 python 写代码", "我们用派森写代码"], ["这个API很好用", "这个 A P I 很好用", "这个api很好用"],
           ["我昨天去了Apple Store", "我昨天去了apple store", "我昨天去了AppleStore"],
           ["这个project的deadline是下周", "这个 project 的 deadline 是下周", "这个项目的截止日期是下周"],
           ["请把PPT发给我", "请把 ppt 发给我", "请把P P T发给我"], ["他在Google工作", "他在谷歌工作", "他在 Google 工作"],
           ["iPhone 15 Pro很贵", "iPhone15Pro很贵", "苹果十五pro很贵"], ["我们开个Zoom meeting吧", "我们开个 zoom meeting 吧"],
           ["OK，没问题", "okay没问题", "好的，没问题"], ["我的email是test@example.com", "我的 e-mail 是 test at example dot com"],
           ["这是一个well-known的方法", "这是一个 well known 的方法"], ["P2P平台", "P二P平台", "p2p 平台"]],
    "trad": [["我們今天討論這個問題", "我们今天讨论这个问题"], ["這個軟體很好用", "这个软件很好用", "这个软体很好用"],
             ["請問圖書館在哪裡", "请问图书馆在哪里"], ["歡迎來到臺灣", "欢迎来到台湾"], ["電腦壞了，需要維修", "电脑坏了需要维修"],
             ["他說話的聲音很大", "他说话的声音很大"]],
    "punct": [["你好！你叫什么名字？", "你好你叫什么名字"], ["他说：“我明天来。”", "他说我明天来"], ["（笑）真的吗……", "真的吗"],
              ["苹果、香蕉、橙子都有。", "苹果 香蕉 橙子都有"], ["《红楼梦》是一本好书", "红楼梦是一本好书"], ["嗯，那个……我想想", "嗯那个我想想"]],
    "rank": [["1", "一"], ["2", "二"], ["10", "十"], ["15", "十五"]],
    "year": [["2020年", "二零二零年", "2020 年"], ["1949年", "一九四九年"], ["去年", "去年"]],
    "big": [["14亿", "十四亿"], ["1400000000", "十四亿"], ["2万", "两万", "二万"], ["12000", "一万两千", "一万二千"], ["3.5万", "三点五万"]],
    "temp": [["5", "五"], ["0", "零"], ["12", "十二"], ["-3", "负三"]],
}

YUE = [
    ("{yp}", {}),
    ("我哋{when}去{place}食{food}。", {}),
    ("呢間舖頭啲嘢{price}，{opinion}", {}),
    ("佢{count}點鐘先返到屋企。", {}),
    ("{cs}", {}),
]
YUE_SLOTS = {
    "yp": [["你食咗飯未呀？", "你食咗飯未呀", "你吃了饭没有"], ["佢唔喺度，出咗去啦。", "佢唔喺度出咗去啦", "他不在这里出去了"],
           ["冇問題㗎，放心啦！", "冇问题㗎放心啦"], ["點解你咁遲嘅？", "点解你咁迟嘅"], ["呢樣嘢係咪你嘅？", "呢样嘢系咪你嘅"],
           ["唔該晒，我識講少少廣東話。", "唔该晒我识讲少少广东话"], ["佢哋話聽日會落雨喎。", "佢哋话听日会落雨喎"],
           ["我啱啱先知道咋。", "我啱啱先知道咋"], ["咁就得囉。", "咁就得啰"]],
    "when": [["聽日", "听日", "明天"], ["今晚", "今晚"], ["禮拜六", "礼拜六", "星期六"], ["3點", "三點", "3 點"]],
    "place": [["旺角", "旺角"], ["銅鑼灣", "铜锣湾"], ["茶樓", "茶楼"], ["尖沙咀", "尖沙咀"]],
    "food": [["點心", "点心"], ["叉燒飯", "叉烧饭"], ["雲吞麵", "云吞面"], ["蛋撻", "蛋挞"]],
    "price": [["好平", "好平"], ["$100蚊", "一百蚊", "100蚊"], ["五十蚊", "50蚊"], ["貴過上次10%", "贵过上次百分之十"]],
    "opinion": [["真係抵食！", "真系抵食"], ["我覺得唔值。", "我觉得唔值"], ["都OK嘅。", "都okay嘅", "都 OK 嘅"]],
    "count": [["10", "十"], ["12", "十二"], ["3", "三"], ["11", "十一"]],
    "cs": [["我個project好busy", "我个 project 好 busy", "我個project好 busy"], ["send個email俾我", "send 个 e-mail 俾我", "send個email畀我"],
           ["佢好nice㗎", "佢好 nice 㗎"], ["今日要開meeting", "今日要开 meeting", "今日要開 Meeting"], ["搭MTR去", "搭 M T R 去", "搭地鐵去"]],
}

EN = [
    ("{opener} {num_sentence}", {}),
    ("The {compound} {verb} {money} on {date}.", {}),
    ("{title} {name} {said} that {acronym} {did} {pct} {when}.", {}),
    ("{filler} {contraction} {spell} {compound2}", {}),
    ("Please {verb2} the {doc} by {time}, {ok}?", {}),
    ("{name} {verb3} {count} {things} in the {decade}.", {}),
    ("{punct}", {}),
]
EN_SLOTS = {
    "opener": [["Well,", "well", "Well"], ["So", "so,"], ["Honestly,", "honestly"], ["Um,", "um", ""], ["", ""]],
    "num_sentence": [["we sold 1,500 units last year.", "we sold fifteen hundred units last year", "we sold one thousand five hundred units last year"],
                     ["it costs $5.20 per pound.", "it costs five dollars and twenty cents per pound", "it costs 5.20 dollars per pound"],
                     ["the score was 3-2 at half-time.", "the score was three two at half time", "the score was 3 to 2 at halftime"],
                     ["about 2.5 million people live there.", "about two point five million people live there"],
                     ["she was born on July 4th, 1990.", "she was born on july fourth nineteen ninety", "she was born on the fourth of july 1990"],
                     ["call me at 555-0123.", "call me at five five five oh one two three", "call me at 5550123"]],
    "compound": [["well-known author", "well known author", "wellknown author"], ["e-mail server", "email server", "e mail server"],
                 ["white paper", "whitepaper", "white-paper"], ["Wi-Fi router", "wifi router", "wi fi router"],
                 ["T-shirt shop", "t shirt shop", "tshirt shop"], ["X-ray machine", "x ray machine", "xray machine"],
                 ["follow-up meeting", "follow up meeting", "followup meeting"], ["long-term plan", "long term plan"]],
    "verb": [["cost", "costs"], ["earned", "earned"], ["lost", "lost"], ["raised", "raised"]],
    "money": [["$20 million", "twenty million dollars", "20000000 dollars"], ["£7.50", "seven pounds fifty", "seven pounds and fifty pence"],
              ["€300", "three hundred euros"], ["$0.99", "ninety nine cents", "99 cents"], ["$1,234.56", "one thousand two hundred thirty four dollars and fifty six cents"]],
    "date": [["March 3rd", "march third", "March 3"], ["the 21st of June", "the twenty first of june"], ["Monday", "monday"],
             ["12/25/2023", "december twenty fifth twenty twenty three"]],
    "title": [["Mr.", "Mister", "Mr"], ["Dr.", "Doctor"], ["Prof.", "Professor"], ["Mrs.", "Missus", "Mrs"], ["St.", "Saint"]],
    "name": [["John", "Jon"], ["Catherine", "Katherine", "Kathryn"], ["Stephen", "Steven"], ["Sarah", "Sara"], ["Mohammed", "Muhammad"],
             ["MacDonald", "McDonald"], ["Geoffrey", "Jeffrey"], ["Alan", "Allan", "Allen"]],
    "said": [["said", "said"], ["announced", "announced"], ["claimed", "claims"]],
    "acronym": [["the BBC", "the B B C", "the b.b.c."], ["the FBI", "the F B I", "the f.b.i."], ["NASA", "nasa", "N A S A"],
                ["the U.S.A.", "the USA", "the U S A"], ["IBM", "I B M", "i.b.m."], ["the UK", "the U K", "the U.K."]],
    "did": [["grew", "grew"], ["cut costs by", "cut costs by"], ["spent", "spent"]],
    "pct": [["20%", "twenty percent", "20 per cent"], ["7.5%", "seven point five percent"], ["100 percent", "100%", "a hundred percent"]],
    "when": [["in 2019", "in twenty nineteen"], ["last year", "last year"], ["in the 1990s", "in the nineteen nineties", "in the 90s"]],
    "filler": [["Uh,", "uh", ""], ["Hmm,", "hmm", ""], ["Ah,", "ah", ""], ["Like,", "like"], ["", ""]],
    "contraction": [["I can't", "I cannot", "I can not"], ["we won't", "we will not"], ["it's", "it is"], ["they've", "they have"],
                    ["he's gone", "he has gone"], ["y'all", "you all"], ["I'm gonna", "I am going to"], ["let's", "let us"],
                    ["we'd been", "we had been"], ["she'll", "she will"]],
    "spell": [["spell it A-B-C,", "spell it a b c", "spell it abc"], ["my code is X Y Z,", "my code is xyz", "my code is x-y-z"],
              ["the plate reads K 9,", "the plate reads k9", "the plate reads k nine"], ["it's a 5G phone,", "it's a 5 g phone", "it's a five g phone"],
              ["A.M.", "am", "a m"], ["P.M.", "pm", "p m"]],
    "compound2": [["all right.", "alright", "all right"], ["et cetera.", "etc", "etcetera"], ["however.", "how ever"],
                  ["the e-book.", "the ebook", "the e book"], ["sci-fi.", "scifi", "sci fi"], ["hi-fi.", "hifi", "hi fi"]],
    "verb2": [["review", "review"], ["sign", "sign"], ["send", "send"], ["finalise", "finalize"], ["analyse", "analyze"]],
    "doc": [["colour report", "color report"], ["programme", "program"], ["catalogue", "catalog"], ["travelogue", "travelog"], ["cancellation form", "cancelation form"]],
    "time": [["3:30 p.m.", "three thirty pm", "3 30 pm"], ["noon", "noon", "12 pm"], ["9 A.M.", "nine am", "9 am"], ["Friday", "friday"]],
    "ok": [["OK", "okay", "ok"], ["alright", "all right"], ["right", "right"]],
    "verb3": [["bought", "bought"], ["sold", "sold"], ["wrote", "wrote"]],
    "count": [["two", "2"], ["twelve", "12"], ["a hundred", "100", "one hundred"], ["3", "three"], ["twenty-five", "twenty five", "25"]],
    "things": [["cars", "cars"], ["songs", "songs"], ["books", "books"], ["flyers", "fliers"]],
    "decade": [["1980s", "nineteen eighties", "eighties", "80s"], ["2000s", "two thousands"], ["'90s", "nineties", "90s"]],
    "punct": [["Wait... what?!", "wait what"], ["He said, \"No way!\"", "he said no way"], ["(laughs) That's it.", "that's it"],
              ["[noise] Hello -- anyone there?", "hello anyone there"], ["Yes; no: maybe.", "yes no maybe"], ["It's Ann's/Anne's bag.", "it's anne's bag"]],
}

OTHER = {  # other languages: the basic path
    "fr": ["Bonjour, ça va ? J'ai 25 ans.", "L'été dernier, nous sommes allés à Paris.", "C'est très cher : 30 € !", "Où est la gare ?"],
    "de": ["Straße und Größe: 3 Äpfel für 2,50 €.", "Wie geht's dir heute?", "Das Café öffnet um 8 Uhr."],
    "es": ["¿Dónde está el baño?", "Mañana vamos a la playa, ¡qué bien!", "Cuesta 15,99 euros."],
}

ZH_NOISE = "的了是在有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穿艺背阵草脚概恶块顿敢守酒岛托央户烈洋哥索胡款靠评版宝座释景顾弟登货互付伯慢欧换闻危忙核暗姐介坏讨丽良序升监临亮露永呼味野架域沙掉括舰鱼杂误湾吉减编楚肯测败屋跑梦散温困剑渐封救贵枪缺楼县尚毫移娘朋画班智亦耳恩短掌恐遗固席松秘谢鲁遇康虑幸均销钟诗藏赶剧票损忽巨炮旧端探湖录叶春乡附吸予礼港雨呀板庭妇归睛饭额含顺输摇招婚脱补谓督毒油疗旅泽材灭逐莫笔亡鲜词圣择寻厂睡博勒烟授诺伦岸奥唐卖俄炸载洛健堂旁宫喝借君禁阴园谋宋避抓荣姑孙逃牙束跳顶玉镇雪午练迫爷篇肉嘴馆遍凡础洞卷坦牛宁纸诸训私庄祖丝翻暴森塔默握戏隐熟骨访弱蒙歌店鬼软典欲萨伙遭盘爸扩盖弄雄稳忘亿刺拥徒姆杨齐赛趣曲刀床迎冰虚玩析窗醒妻透购替塞努休虎扬途侵刑绿兄迅套贸毕唯谷轮库迹尤竞街促延震弃甲伟麻川申缓潜闪售灯针哲络抵朱埃抱鼓植纯夏忍页杰筑折郑贝尊吴秀混臣雅振染盛怒舞圆搞狂措姓残秋培迷诚宽宇猛摆梅毁伸摩盟末乃悲拍丁赵"


def _pick(rng: random.Random, options: list[str], same: float) -> tuple[str, str]:
    ref = rng.choice(options)
    hyp = ref if rng.random() < same else rng.choice(options)
    return ref, hyp


def _fill(rng: random.Random, template: str, slots: dict[str, list[list[str]]], same: float) -> tuple[str, str]:
    ref, hyp = template, template
    while "{" in ref:
        name = ref[ref.index("{") + 1:ref.index("}")]
        r, h = _pick(rng, rng.choice(slots[name]), same)
        ref, hyp = ref.replace("{" + name + "}", r, 1), hyp.replace("{" + name + "}", h, 1)
    return ref, hyp


def _char_noise(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.choice([1, 1, 2, 3])):
        i = rng.randrange(len(chars) + 1)
        kind = rng.choice(["sub", "del", "ins"])
        if kind == "ins" or not chars or i == len(chars):
            chars.insert(i, rng.choice(ZH_NOISE))
        elif kind == "del":
            del chars[i]
        else:
            chars[i] = rng.choice(ZH_NOISE)
    return "".join(chars)


_EN_WORDS = "the a of to and in that it is was for on are with as his they be at one have this from or had by word but what some we can out other were all there when up use your how said an each she which do their time if will way about many then them write would like so these her long make thing see him two has look more day could go come did number sound no most people my over know water than call first who may down side been now find".split()


def _word_noise(rng: random.Random, text: str) -> str:
    words = text.split()
    for _ in range(rng.choice([1, 1, 2])):
        i = rng.randrange(len(words) + 1)
        kind = rng.choice(["sub", "del", "ins"])
        if kind == "ins" or not words or i == len(words):
            words.insert(i, rng.choice(_EN_WORDS))
        elif kind == "del":
            del words[i]
        else:
            words[i] = rng.choice(_EN_WORDS)
    return " ".join(words)


def pairs(templates, slots, count: int, seed: int, noise) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        template, _ = rng.choice(templates)
        ref, hyp = _fill(rng, template, slots, same=0.35)
        if rng.random() < 0.3:
            hyp = noise(rng, hyp)
        if rng.random() < 0.1:
            hyp = hyp.upper() if rng.random() < 0.5 else hyp.lower()
        if ref.strip() and (ref, hyp) not in [(p["reference"], p["prediction"]) for p in out]:
            out.append({"reference": ref, "prediction": hyp})
    return out


def other_pairs(seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for language, sentences in OTHER.items():
        for sentence in sentences:
            for _ in range(4):
                out.append({"language": language, "reference": sentence, "prediction": _word_noise(rng, sentence) if rng.random() < 0.6 else sentence.lower()})
    return out


def main() -> None:
    sets = {
        "zh": pairs(ZH, ZH_SLOTS, 450, 1, _char_noise),
        "yue": pairs(YUE, YUE_SLOTS, 200, 2, _char_noise),
        "en": pairs(EN, EN_SLOTS, 600, 3, _word_noise),
    }
    for language, rows in sets.items():
        with open(HERE / f"heldout_{language}.jsonl", "w", encoding="utf-8") as f:
            for i, row in enumerate(rows):
                f.write(json.dumps({"id": f"{language}-{i:04d}", **row}, ensure_ascii=False) + "\n")
    with open(HERE / "heldout_other.jsonl", "w", encoding="utf-8") as f:
        for i, row in enumerate(other_pairs(4)):
            f.write(json.dumps({"id": f"{row['language']}-{i:04d}", **row}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
