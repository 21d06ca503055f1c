"""SpeechIO's Chinese text normalization (`cn_tn.py`), as Kimi-Audio-Evalkit and lmms-eval run it.

Both harnesses score Mandarin ASR after SpeechIO's normalizer (github.com/speechio/
chinese_text_normalization, `python/cn_tn.py`) with every option off: no case change, no width
folding, no traditional → simplified, fillers and erhua kept. What is left is its rewriting of
non-standard words into spoken Chinese, then punctuation to spaces. This module reproduces that
behaviour, quirks included, because a score is only comparable if it is computed the same way:

- The text is framed as `^text$`, then rewritten in passes, in this order: dates, money, mobile
  numbers, landline numbers, fractions, percentages, numbers before a measure word, digit runs of
  4 to 32, every remaining number. Each pass finds its matches in the text as it stands, then
  replaces the *first occurrence* of each matched string in turn — which is not always the place
  it was found (`12和2个` reads `1二和二个` → `一二和二个`, not `十二和二个`).
- Numbers are read in the "mid" system (万, 亿 = 万万, 兆 = 万亿 …): 120 → 一百二十, 10 → 十,
  105 → 一百零五, 3.5 → 三点五, 0.5 → 零点五; a 2 before 百/千/万/亿 that does not follow 十 is
  两 (200 → 两百, 12000 → 一万两千, 22 → 二十二). Digit runs, years, phone numbers: digit by
  digit (2024年 → 二零二四年). Fractions: 1/3 → 三分之一; percentages: 50% → 百分之五十.
- `\\d` is Unicode's: full-width and other decimal digits are read too.
- Leading `^` and trailing `$` of the text are stripped with the frame (so is a `$` the text
  itself ends with).
- Then the Chinese and ASCII punctuation of SpeechIO's table become spaces (other symbols stay).
"""

from __future__ import annotations

import re
import string
from typing import Callable

_DIGITS = "零一二三四五六七八九"
# Powers of ten of the unit characters, "mid" system: 十 百 千 万, then 亿 = 10^8 and every next one × 10^4.
_UNITS = {1: "十", 2: "百", 3: "千", 4: "万", **{8 + 4 * i: ch for i, ch in enumerate("亿兆京垓秭穰沟涧正载")}}

_CURRENCY_UNIT = "((亿|千万|百万|万|千|百)|(亿|千万|百万|万|千|百|)元|(亿|千万|百万|万|千|百|)块|角|毛|分)"
# Measure words, in SpeechIO's order (the order decides how far a match reaches, and so where the next one starts).
_MEASURE_WORDS = (
    "匹 张 座 回 场 尾 条 个 首 阙 阵 网 炮 顶 丘 棵 只 支 袭 辆 挑 担 颗 壳 窠 曲 墙 群 腔 砣 座 客 贯 扎 捆 刀 令 打 手 罗 坡 山 "
    "岭 江 溪 钟 队 单 双 对 出 口 头 脚 板 跳 枝 件 贴 针 线 管 名 位 身 堂 课 本 页 家 户 层 丝 毫 厘 分 钱 两 斤 担 铢 石 钧 锱 忽 "
    "(千|毫|微)克 毫 厘 分 寸 尺 丈 里 寻 常 铺 程 (千|分|厘|毫|微)米 撮 勺 合 升 斗 石 盘 碗 碟 叠 桶 笼 盆 盒 杯 钟 斛 锅 簋 篮 盘 "
    "桶 罐 瓶 壶 卮 盏 箩 箱 煲 啖 袋 钵 年 月 日 季 刻 时 周 天 秒 分 旬 纪 岁 世 更 夜 春 夏 秋 冬 代 伏 辈 丸 泡 粒 颗 幢 堆 条 根 "
    "支 道 面 片 张 颗 块"
).split()
_MEASURE_WORD = "(" + "|".join(_MEASURE_WORDS) + ")"

_DATE = re.compile(r"\D+((([089]\d|(19|20)\d{2})年)?(\d{1,2}月(\d{1,2}[日号])?)?)")
_MONEY = re.compile(r"\D+((\d+(\.\d+)?)[多余几]?" + _CURRENCY_UNIT + r"(\d" + _CURRENCY_UNIT + r"?)?)")
_MOBILE = re.compile(r"\D((\+?86 ?)?1([38]\d|5[0-35-9]|7[678]|9[89])\d{8})\D")
_LANDLINE = re.compile(r"\D((0(10|2[1-3]|[3-9]\d{2})-?)?[1-9]\d{6,7})\D")
_FRACTION = re.compile(r"(\d+/\d+)")
_PERCENT = re.compile(r"(\d+(\.\d+)?%)")
_MEASURED = re.compile(r"(\d+(\.\d+)?)[多余几]?" + _MEASURE_WORD)
_DIGIT_RUN = re.compile(r"(\d{4,32})")
_NUMBER = re.compile(r"(\d+(\.\d+)?)")
_LETTERS_TWO_LETTERS = re.compile(r"(([a-zA-Z]+)二([a-zA-Z]+))")  # P2P, B2B: a 2 read 二 goes back

# SpeechIO's punctuation table (from the Zhon project) plus ASCII punctuation: each becomes a space.
_PUNCTUATION = ("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃《》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿"
                "–—‘’‛“”„‟…‧﹏·〈〉-" + string.punctuation)
_TO_SPACE = str.maketrans(_PUNCTUATION, " " * len(_PUNCTUATION))

Symbol = tuple[str, int]  # ("digit", value), ("unit", power) or ("point", 0)


def _grouped(digits: str) -> list[Symbol]:
    """Digits and units of an integer string, as SpeechIO reads it: 10456 → 一 万 零 四 百 五 十 六."""
    significant = digits.lstrip("0")
    if not significant:
        return []
    if len(significant) == 1:
        return ([("digit", 0)] if len(digits) != len(significant) else []) + [("digit", int(significant))]
    power = max(p for p in _UNITS if p < len(significant))
    return _grouped(digits[:-power]) + [("unit", power)] + _grouped(significant[-power:])


def _liang(symbols: list[Symbol], i: int) -> bool:
    """Whether the 2 at `i` is read 两: before a unit above 十, and not after 十 (nor after a digit or the point)."""
    after = symbols[i + 1] if i + 1 < len(symbols) else None
    before = symbols[i - 1] if i > 0 else None
    if after is None or after[0] != "unit" or after[1] == 1:
        return False
    return before is None or (before[0] == "unit" and before[1] != 1)


def spoken(number: str, units: bool = True, liang: bool = True) -> str:
    """A number string in Chinese: with units (120 → 一百二十) or digit by digit (units=False: 120 → 一二零)."""
    whole, _, fraction = number.partition(".")
    if "." in fraction:
        raise ValueError(f"not a number: {number!r}")
    symbols = _grouped(whole) if units and len(whole) > 1 else [("digit", int(c)) for c in whole]
    if fraction:
        symbols += [("point", 0)] + [("digit", int(c)) for c in fraction]
    text = "".join(
        "两" if liang and kind == "digit" and value == 2 and _liang(symbols, i)
        else _DIGITS[value] if kind == "digit" else _UNITS[value] if kind == "unit" else "点"
        for i, (kind, value) in enumerate(symbols)
    )
    if text.startswith("点"):
        return "零" + text
    return text[1:] if text[:2] == "一十" else text  # 10-19 are read 十, 十一 …


def _digits(number: str) -> str:
    return spoken(number, units=False, liang=False)


def _date(date: str) -> str:
    """2024年3月5日 → 二零二四年三月五日: the year digit by digit, month and day as numbers."""
    year, sep, rest = date.strip().partition("年")
    year, rest = (_digits(year) + "年", rest) if sep else ("", date)
    if not rest:
        return year
    month, sep, day = rest.strip().partition("月")
    month, day = (spoken(month) + "月", day) if sep else ("", date)
    return year + month + (spoken(day[:-1]) + day[-1] if day else "")


def _money(money: str) -> str:
    for number in [m.group(1) for m in _NUMBER.finditer(money)]:
        money = money.replace(number, spoken(number), 1)
    return money


def _mobile(number: str) -> str:
    return "".join(_digits(part) for part in number.strip("+").split())


def _landline(number: str) -> str:
    return "".join(_digits(part) for part in number.split("-"))


def _fraction(fraction: str) -> str:
    numerator, denominator = fraction.split("/")
    return spoken(denominator) + "分之" + spoken(numerator)


def _percent(percent: str) -> str:
    return "百分之" + spoken(percent.strip().strip("%"))


def _rewrite(text: str, pattern: re.Pattern[str], convert: Callable[[re.Match[str]], str]) -> str:
    """Each match's group 1, found in `text` as it stands, replaced where it first occurs (SpeechIO's way)."""
    for match in list(pattern.finditer(text)):
        if match.group(1):
            text = text.replace(match.group(1), convert(match), 1)
    return text


_PASSES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_DATE, lambda m: _date(m.group(1))),
    (_MONEY, lambda m: _money(m.group(1))),
    (_MOBILE, lambda m: _mobile(m.group(1))),
    (_LANDLINE, lambda m: _landline(m.group(1))),
    (_FRACTION, lambda m: _fraction(m.group(1))),
    (_PERCENT, lambda m: _percent(m.group(1))),
    (_MEASURED, lambda m: spoken(m.group(1))),
    (_DIGIT_RUN, lambda m: _digits(m.group(1))),
    (_NUMBER, lambda m: spoken(m.group(1))),
    (_LETTERS_TWO_LETTERS, lambda m: m.group(2) + "2" + m.group(3)),
)


def spoken_form(text: str) -> str:
    """Numbers, dates, money, phone numbers, fractions and percentages in spoken Chinese (SpeechIO's passes)."""
    text = "^" + text + "$"
    for pattern, convert in _PASSES:
        if pattern is _PERCENT:
            text = text.replace("％", "%")
        text = _rewrite(text, pattern, convert)
    return text.lstrip("^").rstrip("$")


def normalize(text: str) -> str:
    """SpeechIO's TextNorm with every option off: spoken forms, then its punctuation to spaces."""
    return spoken_form(text).translate(_TO_SPACE)
