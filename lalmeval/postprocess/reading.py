"""Careful reading of a transcript or translation reply: the one span of it that holds the text asked for.

Audio language models wrap a transcript in chat: "The original content of this audio is: '…'",
"Okay, here's the transcription of the audio:", "language English<asr_text>…", "If you have any
more questions, please feel free to ask." `read_transcript` removes such wrapping, rule by rule,
and names every rule that changed the text (docs/reading.md lists them with their sources).

The invariant: once engine tags are removed, what is read is one contiguous span of the reply.
Every rule below only cuts at the ends of the text; none adds, reorders or rewrites a word. A
lead-in is cut only where a delimiter (a colon, an opening quote, a line break) closes a phrase
that announces the text, so a transcript that merely begins "Okay, …", "Here is …" or
"Transcription of …" is left whole. A refusal ("I'm sorry, I can't transcribe …") reads as the
empty text: every reference word is then a deletion.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Optional

from lalmeval.config.languages import NAMES

# Rules run again on what they left (a lead-in inside bold, a quote inside a wrapper), at most this often.
MAX_PASSES = 4
MAX_MARKS = 16  # a reply with more tag openings or fences than this has no one wrapper to read

# --------------------------------------------------------------------------- engine tags and wrappers

_SPECIAL_TOKEN = re.compile(r"<\|[^|<>\n]{1,40}\|>")          # <|en|>, <|endoftext|>, <|im_end|>
_ASR_TAG = re.compile(r"</?asr_text>", re.IGNORECASE)           # Qwen3-ASR
_LANGUAGES = (r"English|Chinese|Mandarin|Cantonese|Japanese|Korean|French|German|Spanish|Italian|Portuguese|Russian|"
              r"Arabic|Dutch|Polish|Turkish|Vietnamese|Thai|Indonesian|Hindi|Swedish|Czech|Finnish|Greek|None|unknown|[a-z]{2}")
_ASR_LANGUAGE = re.compile(r"^\s{0,8}language\s{1,4}(?:" + _LANGUAGES + r")\s{0,4}(?=<asr_text>|\n|$)", re.IGNORECASE)
_WRAPPER = re.compile(r"<(answer|transcript|transcription|translation|text|output|result|response)>(.*?)</\1>",
                      re.IGNORECASE | re.DOTALL)
# Two backticks too: the general postprocessor may already have taken one from each end as a wrapping quote.
_FENCE = re.compile(r"`{2,3}[A-Za-z0-9_-]{0,20}[ \t]*\n(.*?)\n[ \t]*`{2,3}|```(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class TextReading:
    """What was read from a reply: the text scored, the rules that changed it, and whether it refused."""

    text: str
    rules: tuple[str, ...] = ()
    refusal: bool = False


def without_tags(reply: str) -> tuple[str, list[str]]:
    """The reply without engine tags (<|en|>, <asr_text>, a leading 'language English'), and the rule if any fired."""
    text = _ASR_LANGUAGE.sub("", reply, count=1)
    text = _ASR_TAG.sub("", _SPECIAL_TOKEN.sub("", text))
    return text, (["tags"] if text != reply else [])


def _inside_wrapper(text: str) -> Optional[str]:
    """The content of the one <answer>…</answer>-style wrapper, or of the one code fence, the text holds."""
    for pattern, mark in ((_WRAPPER, "<"), (_FENCE, "``")):
        if not 0 < text.count(mark) <= MAX_MARKS:  # each unclosed mark would scan the rest of the text
            continue
        found = [m for m in pattern.finditer(text) if m.group(m.lastindex or 0).strip()]
        if len(found) == 1:
            return found[0].group(found[0].lastindex or 0)
    return None


# --------------------------------------------------------------------------- refusals

_REFUSAL_EN = re.compile(
    r"^\W{0,4}(?:(?:i'?m|i am|i’m)\s+(?:really\s+|very\s+)?sorry|sorry|unfortunately|apologies|as an ai\b|as a (?:text-based|language) model|"
    r"i\s+(?:cannot|can't|can’t|can not|am unable to|am not able to|'m unable to|’m unable to|don't have|do not have|could not|couldn't))",
    re.IGNORECASE)
# What a refusal speaks of: the task it cannot do. "Sorry, I can't hear you", "I'm sorry, I can't transcribe your
# handwriting" and "Unfortunately, the audio equipment broke down" are speech; "I can't transcribe this audio",
# "I'm unable to process audio files" and "the recording is too noisy to transcribe" decline the task.
_REFUSED_MEDIUM = r"(?:audio|recording|recordings|sound\s+clip|clip|audio\s+files?|sound\s+files?|voice\s+message|speech)"
_UNABLE = (r"(?:can't|can’t|cannot|can\s+not|unable\s+to|not\s+able\s+to|couldn't|couldn’t|could\s+not|don't\s+have|don’t\s+have|"
           r"do\s+not\s+have|no\s+(?:way|ability)\s+to)")
_TASK_REFUSED = re.compile(
    r"(?i)\b" + _UNABLE + r"[^.!?\n]{0,50}?(?:\b" + _REFUSED_MEDIUM + r"\b|\b(?:transcri\w*|translat\w*|process|analy[sz]e|listen\s+to)"
    r"(?:\s+(?:this|that|it|them))?(?=\s*(?:[.,;!?]|$|\s(?:because|as|since|due|for\s+you|right\s+now|at\s+the\s+moment))))")
_UNCLEAR = re.compile(r"(?i)\b" + _REFUSED_MEDIUM + r"\s+(?:is|was|seems|appears)\s+(?:to\s+be\s+)?"
                      r"(?:too\s+\w+|not\s+clear|unclear|inaudible|silent|empty|corrupted|distorted|garbled|muffled|blank)")
_MODEL_REFUSAL = re.compile(r"(?i)\b(?:as\s+an\s+ai|(?:language|text-based)\s+model)\b[^.!?\n]{0,80}?\b" + _UNABLE)
_GENERIC_REFUSAL = re.compile(r"(?i)\b(?:can't|can’t|cannot|can\s+not|unable\s+to|not\s+able\s+to)\s+(?:help|assist)\s+(?:you\s+)?with\s+(?:that|this)"
                              r"(?:\s+request)?\W{0,4}$")
_REFUSAL_ZH = re.compile(r"^\W{0,4}(?:很?抱歉|对不起|對不起|不好意思|很遗憾|很遺憾|我无法|我無法|我不能|作为(?:一个)?AI|作為(?:一個)?AI)")
# As in English, the inability must reach the task: 我无法识别这段音频, not 我无法参加会议 or 我听不懂你说的话.
_REFUSAL_TOPIC_ZH = re.compile(r"(?:无法|無法|不能|没有办法|沒有辦法|听不|聽不|不支持|不支援)[^。！？\n]{0,20}?"
                               r"(?:音频|音頻|录音|錄音|语音|語音|声音|聲音|音档|音檔|转录|轉錄|转写|轉寫|识别|識別|翻译|翻譯|处理|處理|文件|檔案)")


def is_refusal(text: str) -> bool:
    """Whether the reply declines the task ('I'm sorry, I can't transcribe this audio.', 抱歉，我无法识别这段音频)."""
    head = text.strip()[:300]
    if _REFUSAL_EN.match(head):
        return head.count(" ") < 60 and any(p.search(head) for p in (_TASK_REFUSED, _UNCLEAR, _MODEL_REFUSAL, _GENERIC_REFUSAL))
    return bool(_REFUSAL_ZH.match(head) and _REFUSAL_TOPIC_ZH.search(head))


# --------------------------------------------------------------------------- lead-ins

_MD = r"(?:[-*•][ \t]{1,4})?[*_#>\s]{0,6}"  # markdown around a lead-in: "**Transcription:**", "### Translation", "- **Transcription:**"
_OPENER = r"(?:(?:sure|okay|ok|alright|all right|certainly|of course|well|yes|absolutely|great|no problem|got it|here you go)\W{0,3}\s{0,3}){0,3}"
_THING = (r"(?:transcri(?:pt|ption|bed\s+text|bed\s+content)|translation|original|source\s+text|translated\s+(?:text|sentence|version)|"
          r"(?:original\s+|spoken\s+|audio\s+|speech\s+)?(?:content|text|words|wording)|speech|speech\s+recognition\s+result|asr\s+(?:output|result))")
_MEDIUM = r"(?:audio|audio\s+clip|clip|recording|speech|sound|file|audio\s+file|voice\s+message|utterance|sentence|passage|segment)"
# Words that may qualify what a lead-in announces. Any word would also cut "Send the text: I'll be late" or "Here's
# the content of my speech: thank you"; these only describe a transcript or a translation.
_ADJ = (r"(?:full|complete|exact|verbatim|final|requested|literal|accurate|direct|corrected|resulting|automatic|raw|best|likely|possible|"
        r"approximate|rough|word-for-word|proper|natural|original|spoken|audio|speech|asr|transcribed|translated|whole|entire|provided|given|"
        r"uploaded|attached|above|short|clean|cleaned|precise|faithful|english|chinese|mandarin|german|french|spanish|japanese|korean|"
        r"italian|russian|portuguese|arabic|dutch|simplified|traditional)")
_ADJS = r"(?:" + _ADJ + r"[\s-]+){0,2}?"
_OF_MEDIUM = r"(?:\s+(?:of|from|in|for)\s+(?:the|this|that|your|the\s+given|the\s+provided)?\s*(?:" + _ADJ + r"\s+)?" + _MEDIUM + r")?"
_INTO = r"(?:\s+(?:in|into|to)\s+(?:[A-Z][a-z]+|simplified\s+chinese|traditional\s+chinese))?"
_IS = r"(?:\s+(?:is|reads|would\s+be|goes|as\s+follows|follows|below))*"
_LANGUAGE = r"(?:English|Chinese|Mandarin|German|French|Spanish|Japanese|Korean|Italian|Russian|Portuguese|Arabic|Dutch|simplified\s+chinese|traditional\s+chinese)"
_PERSON = r"(?:speaker|person|man|woman|voice|narrator|people)"
# "It sounds like someone says \"…\"": only after a hedge, since "Someone says \"hello\" every morning" is speech.
_SOMEONE = r"(?:(?<=like\s)|(?<=that\s)|(?<=think\s)|(?<=believe\s)|(?<=guess\s)|(?<=if\s))(?:someone|somebody|they)"
_SAYS = r"(?:says|said|states|is\s+saying|reads|contains|goes|(?:seems|appears)\s+to\s+(?:say|be\s+saying))"
_HEDGE = r"(?:(?:it\s+)?(?:seems|sounds|appears)\s+(?:like|that|as\s+if)\s+|i\s+(?:think|believe|guess)\s+(?:that\s+)?)?"  # "it seems like the audio says"
_LEAD_IN_EN = re.compile(
    r"^" + _MD + _OPENER + r"(?:"
    # "Here's the transcription of the audio", "Below is the English translation", "This is the content of the audio"
    r"(?:here(?:'s|’s|\s+is|\s+are)|below\s+is|this\s+is|that\s+is|the\s+following\s+is)\s+(?:the|a|an|my|your)?\s*" + _ADJS
    + _THING + _OF_MEDIUM + _INTO + _IS +
    # "The original content of this audio is", "The English translation is", "Transcription"
    r"|(?:the\s+|a\s+)?" + _ADJS + _THING + _OF_MEDIUM + _INTO + _IS +
    # "The audio says", "In the audio, the speaker says", "The person in the audio says", "Here's what the audio says"
    r"|" + _HEDGE + r"(?:in\s+(?:the|this)\s+" + _MEDIUM + r",?\s+)?(?:(?:here|this|that)(?:'s|’s|\s+is)\s+)?(?:what\s+)?(?:(?:the|this|a|an)\s+(?:" + _MEDIUM + "|" + _PERSON + r")|" + _SOMEONE + r")"
    r"(?:\s+in\s+(?:the|this)\s+" + _MEDIUM + r")?\s+" + _SAYS + r"(?:\s+the\s+following(?:\s+(?:speech|words|text|sentence|content))?)?"
    r"|it\s+says"
    # "Here's what was said in the audio"
    r"|(?:(?:here|this|that)(?:'s|’s|\s+is)\s+)?what\s+(?:was|is\s+being|is)\s+(?:said|spoken)(?:\s+in\s+(?:the|this)\s+" + _MEDIUM + r")?"
    # "I've transcribed the audio for you", "I have translated the sentence into English"
    r"|i(?:'ve|’ve|\s+have)?\s+(?:transcribed|translated)\s+(?:the|this|your|it)(?:\s+" + _MEDIUM + r")?" + _INTO + r"(?:\s+for\s+you)?(?:\s+as\s+follows)?"
    # "Translated into English", "The sentence translates to", "\"Guten Abend\" translates to"
    r"|(?:(?:the\s+)?(?:\w+\s+){0,2}?|\"?[^\"\n]{1,200}\"\s+|“[^”\n]{1,200}”\s+)(?:translates|is\s+translated|translated)\s+(?:in)?to(?:\s+" + _LANGUAGE + r")?(?:\s+as)?"
    r"(?:,?\s+(?:it|this)\s+(?:reads|is|says|means))?"
    # "In English, this means", "In Chinese it reads"
    r"|in\s+" + _LANGUAGE + r",?\s+(?:this|it|that)\s+(?:means|reads|says|is|would\s+be|translates\s+(?:as|to))"
    r"|(?:in\s+)?" + _LANGUAGE +
    r")" + r"(?P<delim>" + r"[*_]{0,4}\s{0,4}[:：][*_]{0,4}\s{0,8}|[*_]{0,4}[ \t]{0,4}[.。]?[ \t]{0,4}\n\s{0,8}|[,，]?\s{1,4}(?=[\"'“‘「『]))",
    re.IGNORECASE,
)
_ZH_THING = r"(?:原始内容|原始內容|内容|內容|原文|转录文本|轉錄文本|转录结果|转录|轉錄|转写结果|转写|轉寫|识别结果|識別結果|翻译结果|翻譯結果|中文翻译|中文翻譯|英文翻译|英文翻譯|翻译|翻譯|译文|譯文|文本|文字)"
_LEAD_IN_ZH = re.compile(
    r"^" + _MD + r"(?:(?:好的|好|当然|當然|嗯|可以|没问题|沒問題)[，,。！!、\s]{0,3})?"
    r"(?:[\"“「][^\"”」\n]{1,200}[\"”」]\s{0,2})?"  # the quoted source: "I'm hungry" 的中文翻译是 …
    r"(?:以下是|下面是|这是|這是|这句话|這句話|这段话|這段話|这句|這句|原句|这段|這段|该|該|此|这个|這個)?(?:段)?(?:音频|音頻|语音|語音|录音|錄音|音频文件|音頻文件)?(?:中|里|裡)?的?"
    r"(?:(?:中文|英文|原始|完整)?(?:" + _ZH_THING + r")(?:内容|內容|文本|结果|結果)?(?:如下|是|为|為)?|(?:人|男人|女人|男子|女子|说话人|說話人|说话者|說話者)?(?:说的是|說的是|说|說|说的内容是|說的內容是)"
    r"|(?:翻译|翻譯|译|譯)(?:成|为|為)(?:中文|英文|汉语|漢語|英语|英語)(?:是|为|為|如下)?|(?:中文|英文|汉语|漢語|英语|英語)(?:是|为|為|如下)?"
    r"|(?:这句话|這句話|这段话|這段話)(?:的内容|的內容|的意思)?(?:是|为|為|说的是|說的是))"
    r"(?P<delim>\s{0,4}[*_]{0,4}[:：][*_]{0,4}\s{0,8}|\s{0,4}\n\s{0,8}|\s{0,4}(?=[\"'“‘「『]))"
)


# Lead-ins no transcript begins with, so that a space is delimiter enough: "The original content of this audio
# is …", "The audio says …", "The speaker is saying …".
_STRONG_LEAD_IN = re.compile(
    r"^" + _MD + _OPENER + r"(?:"
    r"(?:here(?:'s|’s|\s+is)\s+|this\s+is\s+)?(?:the|my)\s+" + _ADJS + _THING + r"\s+(?:of|from|in)\s+(?:the|this|that|your)\s+(?:" + _ADJ + r"\s+)?"
    + _MEDIUM + r"\s+(?:is|reads|would\s+be|says)"
    r"|" + _HEDGE + r"(?:in\s+(?:the|this)\s+" + _MEDIUM + r",?\s+)?(?:the|this)\s+(?:" + _MEDIUM + "|" + _PERSON + r")(?:\s+in\s+(?:the|this)\s+" + _MEDIUM + r")?"
    r"\s+(?:says|is\s+saying)(?:\s+that)?"
    r"|" + _HEDGE + _SOMEONE + r"\s+(?:says|is\s+saying)(?:\s+that)?"  # "It sounds like someone says we …"
    r")\s{1,4}(?=\S)",
    re.IGNORECASE,
)


# Only a translation is announced by what its source means: "\"Wir gehen\" means \"We go\"", "It means: …". A
# transcript may well say "\"Hola\" means \"hello\"".
_MEANS = re.compile(
    r"^" + _MD + _OPENER + r"(?:(?:the\s+(?:sentence|phrase|word|expression)\s+)?(?:[\"“「][^\"”」\n]{1,200}[\"”」]|\"?[^\"\n]{1,200}\")\s+"
    r"(?:means|is|would\s+be)(?:\s+(?:in\s+)?" + _LANGUAGE + r")?|(?:it|this|that)\s+means)"
    r"(?P<delim>\s{0,4}[:：]\s{0,8}|\s{1,4}(?=[\"'“‘「『]))", re.IGNORECASE)


def _lead_in(text: str, kind: str = "transcript") -> Optional[int]:
    """Where the text announced by a lead-in starts, or None when the text opens with no lead-in."""
    for pattern in (_LEAD_IN_EN, _LEAD_IN_ZH, _STRONG_LEAD_IN) + ((_MEANS,) if kind == "translation" else ()):
        match = pattern.match(text)
        if match and text[match.end():].strip():
            return match.end()
    return None


# --------------------------------------------------------------------------- what may follow the text

# Chat closers: offers of more help, said to the user. Each form names the help, so that a transcript
# sentence such as "If you have a minute" or "Would you like some tea?" is never one.
_HELP = r"(?:questions?|help|assistance|anything(?:\s{1,8}else)?|clarifications?|requests?|further\s{1,8}\w+|more\s{1,8}\w+|other\s{1,8}\w+)"
# "If you have any questions" closes a chat only with the model's offer in the same sentence ("…, please feel free to
# ask"); a talk's "If you have any questions, please ask after the talk" is speech. So does "Let me know if": it
# offers help or more of the task ("if you need anything else", "if you'd like a summary"), not "if you need a ride".
_OFFER = (r"(?=[^.!?\n]{0,80}?(?:feel\s{1,8}free|let\s{1,8}me\s{1,8}know|(?:don't|don’t|do\s{1,8}not)\s{1,8}hesitate|ask\s{1,8}me|"
          r"i(?:'m|’m|\s{1,8}am)\s{1,8}here|i(?:'d|’d|\s{1,8}would)\s{1,8}be|(?:happy|glad)\s{1,8}to|reach\s{1,8}out|ask\s{1,8}away|"
          r"(?:please|just)\s{1,8}ask\s{0,4}(?:[.!]|$)))")
_OFFERED = (r"(?=[^.!?\n]{0,60}?\b(?:anything|more|further|other|help|questions?|assistance|clarifications?|changes|adjust\w*|"
            r"transcri\w*|translat\w*|summary|summari[sz]\w*|version|format))")
_ZH_OFFER = r"(?=[^。！？\n]{0,20}?(?:随时|隨時|欢迎|歡迎|告诉我|告訴我|问我|問我|提问|提問|咨询|諮詢|联系我|聯繫我|帮|幫|乐意|樂意))"
_CLOSER = re.compile(
    r"(?i)(?:^|(?<=[.!?。！？\n\"'”’」』]))\s{0,8}(?:"
    r"(?:if|should)\s{1,8}you\s{1,8}(?:have|need|want|require)\s{1,8}(?:any\s{1,8})?(?:more\s{1,8}|other\s{1,8}|further\s{1,8}|additional\s{1,8})?" + _HELP + r"\b" + _OFFER +
    r"|(?:if|should)\s{1,8}you(?:'d|’d|\s{1,8}would)\s{1,8}like\s{1,8}(?:me\s{1,8}to|more|any|further|another|a\s{1,8}different)\b"
    r"|(?:please\s{1,8})?let\s{1,8}me\s{1,8}know\s{1,8}(?:if|whether|how|what)\b" + _OFFERED + r"|feel\s{1,8}free\s{1,8}to\s{1,8}(?:ask|reach|let|contact|share|provide)\b"
    r"|(?:i\s{1,8})?hope\s{1,8}(?:this|that|it)\b(?:\s{1,8}\w+){0,3}?\s{1,8}(?:helps?|is\s{1,8}helpful|was\s{1,8}helpful|is\s{1,8}useful)\b"
    r"|is\s{1,8}there\s{1,8}anything\s{1,8}else\s{1,8}(?:i|that\s{1,8}i|you)\b|(?:do|would)\s{1,8}you\s{1,8}(?:need|want|like)\s{1,8}(?:me\s{1,8}to|any\s{1,8}(?:more|further|other)|further|more\s{1,8}help)\b"
    r"|(?:i'?m|i\s{1,8}am)\s{1,8}(?:happy|glad)\s{1,8}to\s{1,8}help\b|happy\s{1,8}to\s{1,8}help\s{1,8}(?:further|more|with)\b"
    r"|(?:如果(?:您|你)?(?:还有|還有|有)|如有|如還有|如还有)(?:其他|任何|更多)?(?:问题|問題|需要|疑问|疑問)" + _ZH_OFFER + r"|欢迎(?:继续|随时)?(?:提问|咨询)|歡迎(?:繼續|隨時)?(?:提問|諮詢)"
    r"|希望(?:这|這|以上|对您|對您|对你|對你)?(?:能|对|對)?.{0,6}(?:有帮助|有幫助)"
    r"|(?:请|請)?(?:随时|隨時)(?:告诉|告訴|问|問)|还有什么(?:需要|可以)|還有什麼(?:需要|可以)|需要(?:我|其他)(?:帮|幫)"
    r")[^\n]*$",
)
_NOTE = re.compile(
    r"(?i)(?:\n\s{0,8}|(?<=[.!?。！？\"'”’」』])\s{0,8}|\s{1,8}(?=[(\[]))(?:"
    r"[(\[]?\s{0,8}\**\s{0,8}(?:note|notes|n\.b\.|explanation|translation\s{1,8}notes?|comment|remark|disclaimer|breakdown|literal(?:ly|\s{1,8}translation|\s{1,8}meaning)?)\s{0,8}\**\s{0,8}[:：]"
    r"|[(\[]?\s{0,8}(?:注|注意|说明|說明|备注|備註|解释|解釋)\s{0,8}[:：]"
    r")[\s\S]*$")
# A paragraph after the text that speaks about the audio or the wording rather than continuing it.
_ABOUT = re.compile(
    r"(?i)\n\s{0,8}(?:"
    r"(?:the|this|that)\s{1,8}(?:" + _LANGUAGE + r"\s{1,8})?(?:audio|recording|clip|speaker|speech|translation|transcription|transcript|sentence|phrase|word|term|expression|original)\b"
    r"|(?:in\s{1,8}this\s{1,8}(?:translation|transcription|audio|recording))|i\s{1,8}(?:have|'ve|’ve)?\s{0,8}(?:translated|transcribed|kept|chose|used|rendered|left)\b"
    r"|(?:here|there)\s{0,8},\s{1,8}|here(?:'s|’s|\s{1,8}is)\s{1,8}(?:a|the)\s{1,8}(?:breakdown|explanation|literal|word-by-word|closer\s{1,8}look)\b|\"[^\"\n]{1,60}\"\s{1,8}(?:is|means|was|can\s{1,8}be|refers)\b|“[^”\n]{1,60}”\s{1,8}(?:is|means|was|can\s{1,8}be|refers)\b"
    r"|(?:这段|這段|该|該)(?:音频|音頻|录音|錄音|翻译|翻譯)|(?:这句话|這句話|这段话|這段話|这句|這句|原文|原句)的?(?:意思|含义|含義|表达|表達|表示|是说|是說|说的是|說的是)|(?:其中|这里|這裡|此处|此處)(?:[，,]|\s{0,2}[\"“「『])|[\"“「『][^\"”」』\n]{1,30}[\"”」』]\s{0,2}(?:是|指|意思|意为|意為|译为|譯為|表示|表达|表達)|以上(?:是|为|為|就是)"
    r")[\s\S]*$")
_TRAILING_ASIDE = re.compile(
    r"(?i)\s{0,8}(?:[(\[](?:[^()\[\]\n]{0,160}\b(?:audio|recording|unclear|inaudible|noise|speaker|transcri\w*|translat\w*|note|literally|lit\.|or\s{1,8}more\s{1,8}literally)\b[^()\[\]\n]{0,160})[)\]]"
    r"|（[^（）\n]{0,80}(?:音频|音頻|录音|錄音|噪音|杂音|雜音|听不清|聽不清|不清楚|注|翻译|翻譯|直译|直譯|意译|意譯|字面)[^（）\n]{0,80}）)[.。]?\s{0,8}$")


_OPENING = {'"': '"', "“": "”", "「": "」", "『": "』", "«": "»", "'": "'", "‘": "’"}
_QUOTE_MARKS = "\"“”「」『』«»"


def _announced_quote(text: str) -> Optional[str]:
    """An announced text that opens with a quote ends where the quote closes: what follows it ("'Go home.' The
    speaker sounds tired.", "\"…\", but I'm not certain.") is the model's own comment. A quote left open (its
    closing mark taken by the postprocessor) loses its opening mark. None when neither applies, or when more
    quoted speech follows the quote (\"Stop,\" she said, \"…\")."""
    if not text or text[0] not in _OPENING:
        return None
    close = _OPENING[text[0]]
    if len(text) > 1 and text.rstrip(_END_MARKS).endswith(close):  # "'The boys' bikes were stolen.'": the quote may wrap it all
        return None
    if close in ("'", "’"):  # an apostrophe inside a word ("don't") closes nothing
        found = re.search(r"(?<=\S)['’](?!\w)", text[1:])
        end = found.start() + 1 if found else -1
    else:
        end = text.find(close, 1)
    if end < 0:
        return text[1:] if text[0] not in text[1:] else None
    rest = text[end + 1:]
    if not rest.strip(_END_MARKS) or any(mark in rest for mark in _QUOTE_MARKS) or "'" in rest.lstrip(_END_MARKS)[:1]:
        return None
    return text[: end + 1]


# The doubt a model adds after an announced text: "…, but I'm not certain.", "…, though it's a little unclear."
# Only after a lead-in: a speaker may well say "I'll come, but I'm not sure."
_DOUBT = re.compile(
    r"(?i)\s{0,4}[,;]?\s{1,4}(?:but|though|although)\s{1,4}(?:i(?:'m|’m|\s{1,4}am)\s{1,4}not\s{1,4}(?:entirely\s{1,4}|completely\s{1,4}|100%\s{1,4})?"
    r"(?:certain|sure)|it(?:'s|’s|\s{1,4}is)\s{1,4}(?:a\s{1,4}(?:little|bit)\s{1,4}|somewhat\s{1,4})?(?:unclear|hard\s{1,4}to\s{1,4}(?:hear|tell)|muffled|noisy|faint)"
    r"|the\s{1,4}(?:audio|recording)\s{1,4}is\s{1,4}(?:a\s{1,4}(?:little|bit)\s{1,4}|somewhat\s{1,4})?(?:unclear|muffled|noisy|faint))[^\n]{0,40}?[.!]?\s{0,4}$")


def _without_tail(text: str, announced: bool = False) -> tuple[str, list[str]]:
    """The text without chat closers and notes about the audio or the wording after it."""
    rules = []
    doubt = (("note", _DOUBT),) if announced else ()
    for rule, pattern in (("closer", _CLOSER), ("note", _NOTE), ("note", _ABOUT), ("note", _TRAILING_ASIDE)) + doubt:
        match = pattern.search(text)
        if match and text[: match.start()].strip():
            text = text[: match.start()].rstrip()
            rules.append(rule)
    return text, rules


# --------------------------------------------------------------------------- wrapping quotes and bold

_PAIRS = {'"': '"', "'": "'", "“": "”", "‘": "’", "「": "」", "『": "』", "`": "`", "«": "»"}
_END_MARKS = " \t\n.,;!?。，；！？"


_LANGUAGE_TAIL = re.compile(r"(?<=[\"'”’」』])\s{1,4}in\s+" + _LANGUAGE + r"\s{0,8}[.。]?\s{0,8}$", re.IGNORECASE)
_BLOCKQUOTE = re.compile(r"^>[ \t]{0,4}(?=\S)(?!.*\n)")


def _unquoted(text: str) -> Optional[str]:
    """The inside of quotes, bold or a one-line blockquote that wrap the whole text (a closing mark, or 'in
    English', may follow the quote)."""
    if _BLOCKQUOTE.match(text.strip()):
        return text.strip()[_BLOCKQUOTE.match(text.strip()).end():]
    body = _LANGUAGE_TAIL.sub("", text.strip()).rstrip(_END_MARKS)
    if len(body) > 4 and body.startswith("**") and body.endswith("**") and "**" not in body[2:-2]:
        return body[2:-2]
    if len(body) < 2 or body[0] not in _PAIRS or not body.endswith(_PAIRS[body[0]]):
        return None
    inner, close = body[1:-1], _PAIRS[body[0]]
    if close in ("'", "’"):  # apostrophes inside words ("'I don't know'") are no quotes
        return None if re.search(r"(?:^|\s)['‘]|['’](?:\s|$)", inner) else inner
    return None if close in inner or body[0] in inner else inner


# --------------------------------------------------------------------------- labelled sections

_TRANSLATION_LABEL = re.compile(
    r"(?im)^[*_#>\s]{0,6}(?:(?:the\s+)?(?:" + _LANGUAGE + r"\s+)?(?:translation|translated\s+text|translated)(?:\s+(?:in)?to\s+" + _LANGUAGE + r")?"
    r"|(?:中文|英文)?(?:翻译|翻譯|译文|譯文)|" + _LANGUAGE + r")[*_\s]{0,4}[:：][*_]{0,4}[ \t]{0,8}(?=\S)")


_ZH_NAMES = {"中文": "zh", "英文": "en"}


def _names(label: re.Match[str], target: str) -> bool:
    """Whether a section label is the name of the language `target` (ISO code): 'English:', 'Chinese translation:', 中文翻译："""
    words = re.findall(r"[A-Za-z]+|中文|英文", label.group())
    return any(NAMES.get(w.lower(), _ZH_NAMES.get(w)) == target for w in words)


def _section(text: str, kind: str, target: Optional[str] = None) -> Optional[str]:
    """A reply that gives the transcript and then its translation, each under a label ('Original: …
    Translation: …', 'German: … English: …'): for a translation, the section of the target language, else
    the last one; for a transcript, what comes before the first."""
    labels = list(_TRANSLATION_LABEL.finditer(text))
    found = [m for m in labels if m.start() > 0 and text[: m.start()].strip()]
    if not found:
        return None
    if kind != "translation":
        return text[: found[0].start()]
    named = [m for m in labels if target and _names(m, target)]
    if named:
        following = [m.start() for m in labels if m.start() > named[-1].start()]
        return text[named[-1].end(): following[0] if following else len(text)]
    return text[found[-1].end():]


# --------------------------------------------------------------------------- the reading


def _pass(text: str, kind: str, target: Optional[str], announced: bool) -> tuple[str, list[str], bool]:
    """One pass of every cutting rule, in the order a reader meets them, and whether what is left was quoted
    whole: the model's quotes mark the text itself, so no rule reads inside them ('The audio says: "Let me
    know if you need anything else."' is that sentence)."""
    rules: list[str] = []
    inner = _inside_wrapper(text)
    if inner is not None:
        text, rules = inner, rules + ["wrapper"]
    section = _section(text, kind, target)
    if section is not None and section.strip():
        text, rules = section, rules + ["section"]
    start = _lead_in(text, kind)
    if start is not None:
        text, rules = text[start:], rules + ["lead_in"]
    quoted = _announced_quote(text.strip()) if announced or start is not None else None
    if quoted is not None and quoted.strip():
        rest = text.strip()[len(quoted):]
        text, rules = quoted, rules + ["closer" if _CLOSER.match(rest.lstrip(_END_MARKS)) else "note"]
    inner = _unquoted(text)
    whole = inner is not None and inner.strip() != "" and text.strip()[:1] in _PAIRS
    if not whole:
        text, tail = _without_tail(text, announced or start is not None)
        rules += tail
        inner = _unquoted(text)
        whole = inner is not None and inner.strip() != "" and text.strip()[:1] in _PAIRS
    if inner is not None and inner.strip():
        text, rules = inner, rules + ["quotes"]
    return text.strip(), rules, whole


# Models repeat replies (every model of a run saying the same short transcript, a model its one refusal), and a
# peer protocol reads each reply twice: readings of recent replies up to CACHED_CHARS long are kept, at most
# CACHED_READINGS of them (a reading is a pure function of its arguments, and frozen).
CACHED_READINGS = 2048
CACHED_CHARS = 1000


def read_transcript(reply: str, kind: str = "transcript", target: Optional[str] = None) -> TextReading:
    """The transcript (or, with kind 'translation', the translation into `target`, an ISO code) a careful
    grader reads in `reply`, with the rules that cut it."""
    if len(reply) > CACHED_CHARS:
        return _read(reply, kind, target)
    return _recent_reading(reply, kind, target)


@functools.lru_cache(maxsize=CACHED_READINGS)
def _recent_reading(reply: str, kind: str, target: Optional[str]) -> TextReading:
    """`_read`, kept for the CACHED_READINGS replies read last (the cache is thread-safe; scoring runs in threads)."""
    return _read(reply, kind, target)


def _read(reply: str, kind: str, target: Optional[str]) -> TextReading:
    """read_transcript, every time."""
    text, rules = without_tags(reply)
    text = text.strip()
    if is_refusal(text):
        return TextReading("", tuple(rules + ["refusal"]), refusal=True)
    for _ in range(MAX_PASSES):
        cut, fired, quoted = _pass(text, kind, target, "lead_in" in rules)
        if cut == text or not cut:
            break
        text, rules = cut, rules + [r for r in fired if r not in rules]
        if quoted:
            break
    return TextReading(text, tuple(rules))
