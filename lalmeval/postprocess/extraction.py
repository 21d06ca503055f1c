"""Multiple-choice answer extraction: a free-form reply → the index of the option it chose.

Every strategy in EXTRACTORS is `extract(reply, options, labels, pattern=None) -> Optional[int]`
and returns None when the reply does not state exactly one option. Labels are the letters shown
beside the options (A, B, …).

`default` reads a reply the way a careful grader would. The first tier that holds a statement
decides; within a tier the LAST statement wins, so a reply may correct itself.

0. Focus: only the text after the last `</think>` counts (all of it when nothing follows); of a
   longer text than 16 000 characters, its first 4 000 and last 12 000 (a degenerate reply loops
   on; reading it whole could take minutes); NFKC folds full-width forms (Ｃ, （Ｃ）, ：) into
   plain ones. Every step is linear in the text read: no pattern tries every split of a long run.
1. Boxes and final answers: `\\boxed{C}` / `\\box{C}` holding a letter, "C. text" or an
   option's text; "final answer", 最终答案 / 最終答案.
2. Explicit answers: "the answer is", "Answer:", "the correct option is", "I choose / I'd say /
   I'll go with", 答案是 / 答案： / 答案為, 正确答案为, 选C / 選C; "C is correct", "C: correct",
   C是正确的, C选项正确; a bold lone letter `**C**`; a line holding only a letter ("c", "(C)",
   "C.") or only one "C. text" (unless several such lines list the options).
3. Conclusions: "so / therefore / thus / hence / overall / in conclusion", 所以 / 因此 / 故 / 综上,
   when the option follows within a few words ("so it is B", 所以是C).
4. Otherwise the mentions that are not negated: letters in a recognisable form ("(b)", "[B]",
   "B.", "B)", "Option B", "Choice B", 選項C, C选项, a bare capital B), option texts, ordinals
   ("option 3", "the third option", "the last one", 第三个选项 → index 2; 1-based in prose).
   Exactly one option named → it; none or several → None (ambiguous, for a judge to decide).

The option a statement in tiers 1–3 points at is the first mention after it in the same sentence
that is not negated; "the answer is A or B" is ambiguous (None). A statement after "if / whether
/ suppose / 如果 / 若" in its sentence is hypothetical and ignored.

Mentions. A longer mention swallows a shorter one it overlaps: "hot dog" swallows "dog", the
option "D major" swallows the letter D, "option 3" is the third option even when an option reads
"3"; numbers keep their neighbours ("57" is not in "157" or "57.5"). Letters: any case when
wrapped or after a cue ("(b)", "answer: b"), capitals only when bare; a capital A or I followed
by an ordinary word ("A dog", "I think") is an article or a pronoun. A letter with an option text
right after it is one mention of the letter ("B. cat" is B even when cat is option A); a text
with its own letter after it ("dog (B)") is one mention, with another option's letter two.

Negation. A mention is not an answer after "not / n't / never" (up to two words before it, never
across "but"), "no / neither / nor / unlike / except / rule out / eliminate / exclude / instead
of / rather than / other than", 不是 / 不选 / 排除 / 并非 / 除了; or when followed by "is wrong /
incorrect / unlikely / not … / out", "doesn't / can't / can be ruled out", ": no", 错误 /
錯誤 / 不正确 / 不对 / 不符合 / 可以排除. The negation before an option covers the options joined
to it ("not A or C"); one after covers them only through a plural ("A and C are wrong", A和B都不对).
An option's own words are never a negation: the option "It is not raining" is simply named.
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Iterator, Optional, Union

from lalmeval.data.choices import LETTERS, labels as make_labels, normalize_text
from lalmeval.errors import UserError
from lalmeval.registry import Registry

Extractor = Callable[[str, list[str], list[str], Optional[str]], Optional[int]]
EXTRACTORS: Registry[Extractor] = Registry("answer extraction")

AMBIGUOUS = "ambiguous"
Verdict = Union[int, str]  # an option index, or AMBIGUOUS

# A reply longer than this is read as its first READ_HEAD and last READ_TAIL characters (a paragraph
# break between): an answer is stated near the end, or at the very start. Such replies are loops of
# repeated text, and reading them whole could take minutes on a degenerate shape.
READ_HEAD, READ_TAIL = 4_000, 12_000
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
# Bounded runs instead of `\s*` and `\**`: two unbounded runs of the same character side by side make a
# regex try every split of a long run (minutes on a reply of spaces or stars); answers never need more.
_S = r"\s{0,8}"
_STARS = r"\*{0,4}"
_OPEN = r"[(\[（【]"
_CLOSE = r"[)\]）】]"
_ALNUM_BEFORE = r"(?<![A-Za-z0-9])"
_ALNUM_AFTER = r"(?![A-Za-z0-9])"


@dataclass(frozen=True)
class Mention:
    """A span of the reply that names option `index`."""

    start: int
    end: int
    index: int
    kind: str  # "letter", "text", "ordinal"
    negated: bool = False
    pair: bool = False  # a letter with an option's text beside it
    strong: bool = False  # a statement by its form: bold lone letter, a line holding only it


# --------------------------------------------------------------------------- text preparation


def window(reply: str) -> str:
    """The part of a reply that is read: all of it, or its first READ_HEAD and last READ_TAIL characters."""
    return reply if len(reply) <= READ_HEAD + READ_TAIL else reply[:READ_HEAD] + "\n\n" + reply[-READ_TAIL:]


def focus(reply: str) -> str:
    """The part of a reply that holds its answer: after the last </think>, at most READ_HEAD + READ_TAIL
    characters of it, NFKC-normalized."""
    closes = [m.end() for m in _THINK_CLOSE.finditer(reply)]
    if closes and reply[closes[-1]:].strip():
        reply = reply[closes[-1]:]
    reply = _THINK_TAG.sub(" ", window(reply))
    return unicodedata.normalize("NFKC", reply)


def _check_labels(options: list[str], labels: list[str]) -> None:
    if len(labels) != len(options) or any(len(x) != 1 or x.upper() not in LETTERS for x in labels):
        raise ValueError(f"labels {labels!r} must be one letter per option ({len(options)} options)")


def _label_index(letter: str, labels: list[str]) -> Optional[int]:
    upper = [x.upper() for x in labels]
    return upper.index(letter.upper()) if letter.upper() in upper else None


# --------------------------------------------------------------------------- resolving a token


MAX_WRAPPERS = 8
_WRAPPER = re.compile(r"\\[A-Za-z]+\s{0,8}\{([^{}]*)\}")
MAX_TOKEN = 2_000  # a box holding more than this is not an answer token


def resolve_token(token: str, options: list[str], labels: list[str]) -> Optional[int]:
    """A short answer token ('b', '(B)', 'B. dog', 'dog') → its option index, or None."""
    token = unicodedata.normalize("NFKC", token)
    # LaTeX wrappers such as \text{B} or \mathbf{B} hold the answer itself (a few levels deep at most).
    for _ in range(MAX_WRAPPERS):
        token, unwrapped = _WRAPPER.subn(r"\1", token)
        if not unwrapped:
            break
    token = token.strip().strip("$*").strip()
    lone = re.fullmatch(_OPEN + "?" + _S + r"([A-Za-z])" + _S + _CLOSE + "?" + _S + r"[.:)]?", token)
    if lone:
        return _label_index(lone.group(1), labels)
    labelled = re.match(_OPEN + "?" + _S + r"([A-Za-z])" + _S + "(?:" + _CLOSE + r"|[.:：、)])" + _S + r"\S", token)
    if labelled and _label_index(labelled.group(1), labels) is not None:
        return _label_index(labelled.group(1), labels)
    wanted = normalize_text(token)
    hits = [i for i, option in enumerate(options) if wanted and normalize_text(option) == wanted]
    return hits[0] if len(hits) == 1 else None


def _boxes(text: str) -> list[tuple[int, str]]:
    """(position, content) of every \\box{…} / \\boxed{…}, nested braces included (one pass over the braces)."""
    openings = {m.end() - 1: m.start() for m in re.finditer(r"\\{1,2}box(?:ed)?\s{0,8}\{", text)}
    if not openings:
        return []
    found, stack = [], []
    for brace in re.finditer(r"[{}]", text):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            opened = stack.pop()
            if opened in openings and brace.start() - opened <= MAX_TOKEN:
                found.append((openings[opened], text[opened + 1: brace.start()]))
    return sorted(found)


# --------------------------------------------------------------------------- finding mentions


def _token_pattern(option: str) -> Optional[str]:
    """A regex for an option's text in a reply: its words in order, any separators between."""
    tokens = re.findall(r"(?:[^\W_]|(?<=\d)[.,](?=\d))+", unicodedata.normalize("NFKC", option))
    if not tokens:
        return None
    body = r"[\W_]{1,8}".join(re.escape(t) for t in tokens)
    # Numbers keep their neighbours: "57" is not inside "157" nor "57.5".
    before = r"(?<![A-Za-z0-9])(?<!\d[.,])" if tokens[0][0].isascii() and tokens[0][0].isalnum() else ""
    after = r"(?![A-Za-z0-9])(?![.,]\d)" if tokens[-1][-1].isascii() and tokens[-1][-1].isalnum() else ""
    return before + body + after


def _text_mentions(text: str, options: list[str]) -> list[Mention]:
    found = []
    for index, option in enumerate(options):
        pattern = _token_pattern(option)
        if pattern:
            found += [Mention(m.start(), m.end(), index, "text") for m in re.finditer(pattern, text, re.IGNORECASE)]
    return found


# Words after a capital A or I that make it a letter rather than an article or a pronoun.
_LETTER_VERBS = (
    r"is|was|seems|appears|looks|sounds|fits|matches|describes|would|could|might|must|should|can|cannot|"
    r"isn't|wasn't|doesn't|does|and|or|vs|versus|nor|but|too|also|then|because|since|as|for|with|are|were"
)


@lru_cache(maxsize=64)
def _letter_forms(letters: str) -> list[tuple[re.Pattern[str], str]]:
    """(pattern, form) for every way a reply names a letter; group 1 is the letter."""
    upper, both = f"([{letters}])", f"([{letters}{letters.lower()}])"
    wrapped = _OPEN + "?" + _S + _STARS + both + _STARS + _S + _CLOSE + "?"
    lead = r"(?m)^[ \t>*#\-•]{0,16}"  # list markers and quote signs a line may start with
    forms = {
        "keyword": r"(?i:\b(?:options?|choices?|letter|answer))" + _S + "[:#]?" + _S + wrapped + _ALNUM_AFTER,
        "keyword_zh": r"(?:选项|選項|答案)" + _S + ":?" + _S + wrapped + _ALNUM_AFTER,
        "letter_zh": _ALNUM_BEFORE + upper + _S + r"(?:选项|選項|项|項)",
        "wrapped": _OPEN + _S + both + _S + _CLOSE,
        # "**B**" but not a heading such as "**B**: dog – …"
        "bold": r"\*\*" + _S + wrapped + _S + r"[.)]?" + _S + r"\*\*(?!\s{0,8}[:\-–—])",
        "line": lead + wrapped + _S + r"[.。:)]?" + _S + _STARS + r"[ \t]{0,16}$",
        "start": lead + _STARS + both + _STARS + _S + r"[.):、](?=\s|$)",
        # A capital standing alone; not in "A/B", "C++", "Q&A", "B-flat", "it's".
        "bare": r"(?<![A-Za-z0-9'’\-_./\\&])" + upper + r"(?![A-Za-z0-9'’\-_+#/])",
    }
    return [(re.compile(pattern), form) for form, pattern in forms.items()]


_FOLLOWING_WORD = re.compile(r"\s{1,8}([a-z][\w']*)")


def _is_article(text: str, match: re.Match[str]) -> bool:
    """'A dog', 'I think': a capital A or I followed by an ordinary word."""
    if match.group(1) not in "AI":
        return False
    following = _FOLLOWING_WORD.match(text, match.end())
    return bool(following) and not re.fullmatch(_LETTER_VERBS, following.group(1))


def _letter_mentions(text: str, labels: list[str]) -> list[Mention]:
    found = []
    for pattern, form in _letter_forms("".join(x.upper() for x in labels)):
        for match in pattern.finditer(text):
            if form == "bare" and _is_article(text, match):
                continue
            index = _label_index(match.group(1), labels)
            found.append(Mention(match.start(), match.end(), index, "letter", strong=form in ("bold", "line")))
    return found


_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
             "eighth": 8, "ninth": 9, "tenth": 10, "1st": 1, "2nd": 2, "3rd": 3}
_CJK_NUMBERS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_ORDINAL_FORMS = [
    re.compile(r"(?i)\b(?:options?|choices?|number|no\.|#)\s{0,8}(?:number\s{0,8})?(\d{1,2})(?!\d|[.,]\d)"),
    re.compile(r"(?i)\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|1st|2nd|3rd|\d{1,3}th)\s{1,8}(?:options?|choices?|answer|alternative|one)\b"),
    re.compile(r"第\s{0,8}([一二三四五六七八九十]|\d{1,2})\s{0,8}(?:个|個)?\s{0,8}(?:选项|選項|项|項|个|個)"),
]


def _ordinal_value(word: str, n: int) -> int:
    word = word.lower()
    if word == "last":
        return n
    if word.isdigit() or word[:-2].isdigit():
        return int(word if word.isdigit() else word[:-2])
    return _ORDINALS.get(word) or _CJK_NUMBERS.get(word, 0)


def _ordinal_mentions(text: str, n: int) -> list[Mention]:
    found = []
    for pattern in _ORDINAL_FORMS:
        for match in pattern.finditer(text):
            value = _ordinal_value(match.group(1), n)
            if 1 <= value <= n:
                found.append(Mention(match.start(), match.end(), value - 1, "ordinal"))
    return found


def _without_swallowed(mentions: list[Mention]) -> list[Mention]:
    """Drop each mention that overlaps a longer one; keep one of identical spans per option."""
    ordered = sorted(mentions, key=lambda m: (m.start, -(m.end - m.start)))
    starts = [m.start for m in ordered]
    longest = max((m.end - m.start for m in ordered), default=0)
    kept: list[Mention] = []
    where: dict[tuple[int, int, int], int] = {}
    for m in ordered:
        # Only mentions starting less than `longest` before m can reach it.
        near = ordered[bisect_left(starts, m.start - longest): bisect_left(starts, m.end)]
        if any(k.end - k.start > m.end - m.start and k.start < m.end and m.start < k.end for k in near):
            continue
        key = (m.start, m.end, m.index)
        if key in where:  # the same letter found by two forms, e.g. bold and lone line
            kept[where[key]] = replace(kept[where[key]], strong=kept[where[key]].strong or m.strong)
            continue
        where[key] = len(kept)
        kept.append(m)
    return kept


_PAIR_GAP = re.compile(r"[\s.:：)\]）】、．*\-–—]{0,4}")


def _merge_pairs(text: str, mentions: list[Mention]) -> list[Mention]:
    """'B. cat', '(B) dog', 'Option 2: dog', 'dog (B)': a label with a text beside it is one mention.

    A label followed by any option's text counts as the label; a text followed by its own label
    in brackets is one mention, and by another option's label stays two (contradictory).
    """
    merged: list[Mention] = []
    for m in mentions:
        prev = merged[-1] if merged else None
        gap = text[prev.end: m.start] if prev else ""
        if prev and prev.kind in ("letter", "ordinal") and not prev.pair and m.kind == "text" and _PAIR_GAP.fullmatch(gap):
            merged[-1] = replace(prev, end=m.end, pair=True, strong=False)
        elif prev and prev.kind == "text" and m.kind == "letter" and m.index == prev.index and re.fullmatch(r"\s*", gap):
            merged[-1] = replace(m, start=prev.start, pair=True, strong=False)
        else:
            merged.append(m)
    return merged


# --------------------------------------------------------------------------- negation


# What may sit between a mention and the words about it: closing brackets, bold, "option".
_TRAIL = r"^[\s)\]）】*]*(?:(?:options?|choices?)\b\s*)?"
_VERB = r"(?:is|was|are|were|seems?|looks?|sounds?|appears?|(?:would|must|can|could|should|may|might)\s+be)"
_ADVERB = r"(?:(?:also|clearly|definitely|obviously|certainly|indeed|probably|likely|both|therefore|thus|simply|just)\s+)?"
_BAD = r"(?:wrong|incorrect|false|inaccurate|invalid|unlikely|impossible|implausible|a\s+distractor|ruled\s+out|eliminated|excluded)\b"
_BAD_ZH = r"(?:错误|錯誤|错的|錯的|不正确|不正確|不对|不對|不符合|不符|不是(?:正确|正確|答案|对|對)|可以排除|应排除|應排除|被排除|排除|错|錯)"
_GOOD = r"(?:the\s+(?:only\s+)?)?(?:correct|right|best|most\s+(?:likely|appropriate|accurate|plausible|suitable))\b(?!\s+(?:if|when|only))"
_GOOD_ZH = r"(?:正确|正確|对的|對的|符合题意|符合題意|最合适|最合適|最佳)"
_ZH_SUBJECT = r"\s*(?:选项|選項|项|項)?\s*(?:也|也是|是|为|為|才是|最|显然|顯然|明显|明顯)?\s*"

_NEG_BEFORE = re.compile(
    r"(?:"
    # "not" may reach over two words ("don't think it's B"), never over "but" ("not A but B").
    r"(?:\b(?:not|never)|n't)\s+(?:(?!(?:but|yet|instead|rather|though|however)\b)[A-Za-z'’]+\s+){0,2}?"
    # The others must touch the option: "rule out A", "instead of B".
    r"|\b(?:no|nor|neither|unlike|except|excluding|exclude|eliminate[sd]?|eliminating|rule[sd]?\s+out|ruling\s+out"
    r"|reject(?:s|ed|ing)?|dismiss(?:es|ed|ing)?|instead\s+of|rather\s+than|other\s+than|without|against)\s+"
    r"|不是|不选|不選|不能选|不能選|不可能是|排除|并非|並非|而非|除了)"
    r"\s*(?:(?:the|an?)\s+)?(?:options?\s*|choices?\s*|letters?\s*|选项|選項)?[\s(\[（【*]*$",
    re.IGNORECASE,
)
# Where each alternative of _NEG_BEFORE can start (a superset): a cheap index of the places worth trying it.
_NEG_TRIGGER = re.compile(r"no|n't|never|neither|unlike|except|exclud|eliminat|rul|reject|dismiss|instead|rather|other|without|against"
                          r"|不|排除|并非|並非|而非|除了", re.IGNORECASE)
_NEG_AFTER = re.compile(
    _TRAIL + r"(?:"
    + rf"(?:[:：\-–—]\s*|\s*{_VERB}\s+{_ADVERB}|\s*){_BAD}"  # "B is wrong", "B: incorrect"
    + r"|[:：\-–—]\s*(?:no|not|nope)\b"  # "B: no", "B – not heard"
    + rf"|\s*{_VERB}\s+{_ADVERB}(?:not|never|out)\b"  # "B is not …", "B is out"
    + r"|\s*(?:isn't|wasn't|aren't|doesn't|don't|does\s+not|do\s+not|can't|cannot|fails?\s+to"
    + r"|can\s+be\s+(?:ruled\s+out|eliminated|excluded))"  # "B doesn't fit"
    + "|" + _ZH_SUBJECT + _BAD_ZH  # A选项错误, B也不对
    + ")",
    re.IGNORECASE,
)


def _after(text: str, m: Mention) -> str:
    """The text after a mention, from before its closing punctuation ('A:' then ' no' reads ': no')."""
    core = text[m.start: m.end].rstrip(".:：、)]）】* ")
    return text[m.start + len(core): m.end + 60]


_PLURAL = re.compile(r"[\s)\]）】*]{0,16}(?:are|were|both|all)\b|[\s)\]）】*]{0,16}(?:都|均|皆)", re.IGNORECASE)
MAX_JOIN = 40  # longest text that may join two options ("A, or option B"): longer gaps join nothing
_JOINED = re.compile(
    r"[\s)\]）】*]*(?:,?\s*\b(?:and|or|nor|and/or)\b|/|、|和|或|或者|及|与|與)\s*(?:options?|choices?)?[\s(\[（【*]*", re.IGNORECASE
)


def _negations(text: str, found: list[Mention]) -> list[Mention]:
    """Mark negated mentions; 'not A or C' and 'A and C are wrong' cover both options.

    A negation before a mention reaches the options joined after it; one after a mention reaches
    the options joined before it only through a plural ('are', 'both', 都), so in
    "B, and A is wrong" the answer B stays.
    """
    # _NEG_BEFORE is tried only where one of its words stands within 60 characters before the mention.
    triggers = [t.start() for t in _NEG_TRIGGER.finditer(text)]
    before = [bisect_left(triggers, m.start - 60) < bisect_left(triggers, m.start)
              and bool(_NEG_BEFORE.search(text[max(0, m.start - 60): m.start])) for m in found]
    after = [bool(_NEG_AFTER.match(_after(text, m))) for m in found]
    plural = [bool(_PLURAL.match(text, m.end)) for m in found]
    joined = [b.start - a.end <= MAX_JOIN and bool(_JOINED.fullmatch(text[a.end: b.start])) for a, b in zip(found, found[1:])]
    forward, backward = before[:], [a and p for a, p in zip(after, plural)]
    for i in range(1, len(found)):
        forward[i] = forward[i] or (joined[i - 1] and forward[i - 1])
    for i in range(len(found) - 2, -1, -1):
        backward[i] = backward[i] or (joined[i] and backward[i + 1])
    flags = [any(x) for x in zip(before, after, forward, backward)]
    return [replace(m, negated=True) if flag else m for m, flag in zip(found, flags)]


_LINE_LEAD = re.compile(r"[ \t>*#\-•]{0,16}")        # list markers and quote signs before a mention on its line
_LINE_TAIL = re.compile(r"(?:[^\S\n]|[.。*]){0,16}(?:\n|$)")  # only dots, bold and spaces after it


def _fills_line(text: str, m: Mention) -> bool:
    """Whether the mention is all its line holds, markers and dots aside (looking no further than 17 characters)."""
    newline = text.rfind("\n", max(0, m.start - 17), m.start)
    if newline < 0 and m.start > 16:
        return False
    return bool(_LINE_LEAD.fullmatch(text, newline + 1, m.start)) and bool(_LINE_TAIL.match(text, m.end))


def _mark_answer_lines(text: str, found: list[Mention]) -> list[Mention]:
    """A line holding only 'C. cow' answers C, unless such lines list several options (an echo)."""
    lines = [m for m in found if m.pair and _fills_line(text, m)]
    if len({m.index for m in lines}) != 1:
        return found
    marked = {id(m) for m in lines}  # by identity: `m in lines` would compare every pair
    return [replace(m, strong=True) if id(m) in marked else m for m in found]


def mentions(reply_text: str, options: list[str], labels: list[str]) -> list[Mention]:
    """Every option the (focused) text names, in order, each marked negated or not."""
    found = _text_mentions(reply_text, options) + _letter_mentions(reply_text, labels)
    found += _ordinal_mentions(reply_text, len(options))
    found = _mark_answer_lines(reply_text, _merge_pairs(reply_text, _without_swallowed(found)))
    return _negations(reply_text, found)


# --------------------------------------------------------------------------- statements


_FINAL_CUES = [r"(?i)\bfinal\s{1,8}(?:answer|choice|option|selection)\b\s{0,8}(?:is|would\s+be|will\s+be|:|-|=)?", r"最终答案|最終答案|最终选择|最終選擇"]
_ANSWER_CUES = [
    r"(?i)\b(?:correct|right|best|true|most\s+(?:likely|appropriate|accurate|plausible|suitable|fitting|reasonable))\s+"
    r"(?:answer|option|choice|response|one)\s*(?:is|would\s+be|must\s+be|should\s+be|seems\s+to\s+be|appears\s+to\s+be|:|-|=)",
    r"(?i)\banswer\s{0,8}(?:is|would\s+be|must\s+be|should\s+be|will\s+be|:|-|=)",
    r"(?i)\bI(?:'d|'ll|\s+would|\s+will)?\s+(?:choose|pick|select|go\s+with|say|opt\s+for)\b",
    r"(?:正确|正確|最佳|最合适|最合適)?的?答案(?:应该|應該|应当|應當|应|應|就|则|則)?(?:是|为|為|选|選|:)",
    r"(?:正确|正確|最佳|最合适|最合適)的?(?:选项|選項|选择|選擇)(?:应该|應該|应|應)?(?:是|为|為|:)",
    r"(?<![不别別])(?:选择|選擇|选|選)(?=\s{0,8}[(\[（【*]{0,4}\s{0,8}[A-Za-z](?![A-Za-z]))",
]
_CONCLUSION_CUES = [
    r"(?i)\b(?:so|therefore|thus|hence|consequently|accordingly|ultimately|overall|in\s+conclusion|in\s+summary|to\s+conclude|to\s+sum\s+up)\b",
    r"所以|因此|故|综上所述|綜上所述|综上|綜上|总之|總之|由此可见|由此可見",
]
_AFFIRMED = re.compile(
    _TRAIL + r"(?:"
    + rf"(?:[:：\-–—]\s*|\s*{_VERB}\s+{_ADVERB}){_GOOD}"  # "C is correct", "C: the best"
    + r"|\s*(?:is|would\s+be|must\s+be)\s+(?:the\s+)?(?:answer|one)\b"  # "C is the answer"
    + r"|[:：\-–—]\s*yes\b"  # "C: yes"
    + "|" + _ZH_SUBJECT + _GOOD_ZH  # C是正确的, C选项正确
    + ")",
    re.IGNORECASE,
)
# "if the answer is A": a condition word earlier in the cue's own sentence (within 200 characters).
_CONDITION = re.compile(r"(?i)\b(?:if|whether|suppose|supposing|assuming|unless)\b|如果|假如|假设|假設|倘若|若")
_CONDITION_REACH = 200
_CONDITION_STOP = re.compile(r"[.!?。！？\n]")
_SENTENCE_END = re.compile(r"\n|[。！？!?;；]|\.(?=\s|$)")
_JOINER = re.compile(
    r"[\s)\]）】*]*(?:,?\s*\b(?:or|and|and/or|as\s+well\s+as|plus)\b|/|,|，|、|或|或者|还是|還是|和|与|與|及)\s*(?:options?|choices?)?[\s(\[（【*]*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Reading:
    """A focused reply with everything it names, indexed once so that each cue costs the same however long
    the reply: mentions ordered by start, sentence ends, condition words ("if ...")."""

    text: str
    labels: list[str]
    found: list[Mention]
    starts: list[int]
    sentence_ends: list[int]
    next_positive: list[int]              # index of the first mention at or after i that is not negated
    conditions: list[tuple[int, int]]
    condition_ends: list[int]
    stops: list[int]                      # where a condition's sentence may end

    @classmethod
    def of(cls, text: str, labels: list[str], found: list[Mention]) -> "Reading":
        """Index `text` and its mentions (one pass each)."""
        following = [len(found)] * (len(found) + 1)
        for i in range(len(found) - 1, -1, -1):
            following[i] = following[i + 1] if found[i].negated else i
        conditions = [m.span() for m in _CONDITION.finditer(text)]
        return cls(text, labels, found, [m.start for m in found], [m.start() for m in _SENTENCE_END.finditer(text)], following,
                   conditions, [end for _, end in conditions], [m.start() for m in _CONDITION_STOP.finditer(text)])

    def clause_end(self, begin: int) -> int:
        """Where the sentence holding `begin` ends (after its end mark), or the text's end."""
        at = bisect_left(self.sentence_ends, begin + 1)
        return self.sentence_ends[at] + 1 if at < len(self.sentence_ends) else len(self.text)

    def hypothetical(self, position: int) -> bool:
        """Whether a condition word stands before `position` in its sentence, at most _CONDITION_REACH back."""
        last = bisect_right(self.condition_ends, position) - 1
        if last < 0 or self.conditions[last][0] < position - _CONDITION_REACH:
            return False
        stop = bisect_left(self.stops, self.conditions[last][1])
        return stop == len(self.stops) or self.stops[stop] >= position

    def positives(self, first: int, stop: int) -> Iterator[Mention]:
        """The mentions from index `first` on that are not negated, in order, while they start before `stop`."""
        i = self.next_positive[first]
        while i < len(self.found) and self.found[i].start < stop:
            yield self.found[i]
            i = self.next_positive[i + 1]


@dataclass(frozen=True)
class Statement:
    """A place where the reply states its answer: `verdict` is an option index or AMBIGUOUS."""

    position: int
    verdict: Verdict


_LEADING = re.compile(r"[\s*_#>:：]*")


def _clause(r: Reading, start: int) -> tuple[int, int]:
    """The sentence that follows a cue: from its first visible character to its end."""
    begin = _LEADING.match(r.text, start).end()
    return begin, r.clause_end(begin)


def _immediate_letter(text: str, at: int, labels: list[str]) -> Optional[Mention]:
    """A letter in any case right where a cue's sentence begins ('the answer is b')."""
    match = re.compile(
        r"(?i:(?:options?|choices?|letter)\s{0,8})?" + _OPEN + "?" + _S + _STARS + _S + r"([A-Za-z])" + _S + _STARS + _S + _CLOSE + "?" + _ALNUM_AFTER
    ).match(text, at)
    if not match or _label_index(match.group(1), labels) is None:
        return None
    following = _FOLLOWING_WORD.match(text, match.end())
    if match.group(1) in "aAiI" and following and not re.fullmatch(_LETTER_VERBS, following.group(1)):
        return None  # "the answer is a dog": an article
    return Mention(match.start(), match.end(), _label_index(match.group(1), labels), "letter")


# A conclusion word reaches only a few words ("so it is B", "overall it's sad", "所以是B").
MAX_REACH = 120
_SHORT_REACH = re.compile(r"[,，]?\s*(?:[A-Za-z'’]+\s+){0,5}|[,，]?[^\s,，。.;；!?！？]{0,6}")


def _covered(r: Reading, first: int, cue_end: int, letter: Mention) -> bool:
    """Whether a mention after the cue (negated or not) already spans the letter."""
    for i in range(first, len(r.found)):
        m = r.found[i]
        if m.start > letter.start:
            return False
        if m.end > cue_end and m.end > letter.end:
            return True
    return False


def _order(m: Mention) -> tuple[int, int]:
    return m.start, -(m.end - m.start)


def _target(r: Reading, cue_start: int, cue_end: int, near: bool) -> Optional[Verdict]:
    """The option a cue points at: the first mention after it in its sentence, not negated."""
    text = r.text
    begin, end = _clause(r, cue_end)
    first_index = bisect_left(r.starts, cue_start)
    positive: Iterator[Mention] = (m for m in r.positives(first_index, end) if m.end > cue_end)
    letter = _immediate_letter(text, begin, r.labels)
    if letter and not _covered(r, first_index, cue_end, letter):
        positive = heapq.merge(positive, [letter], key=_order)
    first = next(positive, None)
    if first is None or (near and (first.start - cue_end > MAX_REACH or not _SHORT_REACH.fullmatch(text[cue_end: max(cue_end, first.start)]))):
        return None
    second = next((m for m in positive if m.start >= first.end), None)
    if second and second.index != first.index and second.start - first.end <= MAX_JOIN and _JOINER.fullmatch(text[first.end: second.start]):
        return AMBIGUOUS  # "the answer is A or B"
    return first.index


def _cue_statements(r: Reading, cues: list[str], near: bool = False) -> list[Statement]:
    statements = []
    for cue in cues:
        for match in re.finditer(cue, r.text):
            if r.hypothetical(match.start()):
                continue
            verdict = _target(r, match.start(), match.end(), near)
            if verdict is not None:
                statements.append(Statement(match.start(), verdict))
    return statements


def _box_statements(text: str, options: list[str], labels: list[str]) -> list[Statement]:
    resolved = [(at, resolve_token(content, options, labels)) for at, content in _boxes(text)]
    return [Statement(at, index) for at, index in resolved if index is not None]


def _affirmed_statements(r: Reading) -> list[Statement]:
    """'C is correct', 'C: correct', C是正确的, a bold lone letter, a line holding only a letter."""
    return [
        Statement(m.start, m.index)
        for m in r.found
        if not m.negated and (m.strong or _AFFIRMED.match(_after(r.text, m)))
    ]


def _last(statements: list[Statement]) -> Optional[Verdict]:
    return max(statements, key=lambda s: s.position).verdict if statements else None


def _unique_mention(found: list[Mention]) -> Optional[int]:
    """Tier 4: the one option named without negation; an echo of the option list is set aside."""
    positive = [m for m in found if not m.negated]
    if len({m.index for m in positive if m.pair}) >= 2:
        positive = [m for m in positive if not m.pair]
    named = {m.index for m in positive}
    return named.pop() if len(named) == 1 else None


def _decide(text: str, options: list[str], labels: list[str]) -> Optional[Verdict]:
    """Tiers 1–4 of the module docstring: the first tier holding a statement decides."""
    found = mentions(text, options, labels)
    r = Reading.of(text, labels, found)
    tiers = (
        lambda: _box_statements(text, options, labels) + _cue_statements(r, _FINAL_CUES),
        lambda: _cue_statements(r, _ANSWER_CUES) + _affirmed_statements(r),
        lambda: _cue_statements(r, _CONCLUSION_CUES, near=True),
    )
    for tier in tiers:
        verdict = _last(tier())
        if verdict is not None:
            return verdict
    return _unique_mention(found)


# --------------------------------------------------------------------------- strategies


@EXTRACTORS.register("default")
def default(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """The option a careful reader would say the reply chose; None when it names none or several."""
    _check_labels(options, labels)
    verdict = _decide(focus(reply), options, labels)
    return verdict if isinstance(verdict, int) else None


@lru_cache(maxsize=64)
def compile_pattern(pattern: Optional[str]) -> re.Pattern[str]:
    """A user's extraction regex, checked: it must compile and hold a capture group."""
    if not pattern:
        raise UserError("answer extraction 'regex' needs a pattern with one capture group")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UserError(f"answer extraction pattern {pattern!r} is not a valid regex: {exc}") from None
    if compiled.groups < 1:
        raise UserError(f"answer extraction pattern {pattern!r} has no capture group for the answer")
    return compiled


@EXTRACTORS.register("regex")
def regex(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """The LAST match of `pattern`; its first capture group that took part holds a letter or an option's text."""
    _check_labels(options, labels)
    matches = list(compile_pattern(pattern).finditer(unicodedata.normalize("NFKC", reply)))
    if not matches:
        return None
    captured = next((g for g in matches[-1].groups() if g is not None), None)
    return resolve_token(captured, options, labels) if captured is not None else None


@EXTRACTORS.register("box")
def box(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """Only \\box{X} / \\boxed{X}: the last box holding a letter, 'X. text' or an option's text (in the window `default` reads)."""
    _check_labels(options, labels)
    return _last(_box_statements(unicodedata.normalize("NFKC", window(reply)), options, labels))


@EXTRACTORS.register("first_letter")
def first_letter(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """The first capital option letter standing alone (not inside a word), wherever it is."""
    _check_labels(options, labels)
    letters = "".join(x.upper() for x in labels)
    found = re.search(r"(?<![A-Za-z0-9])([" + letters + r"])(?![A-Za-z0-9])", unicodedata.normalize("NFKC", reply))
    return _label_index(found.group(1), labels) if found else None


def extract_choice(
    strategy: str, reply: str, options: list[str], labels: Optional[list[str]] = None,
    pattern: Optional[str] = None, where: Optional[str] = None,
) -> Optional[int]:
    """Run the extraction strategy called `strategy`; an unknown name is a UserError naming `where`."""
    return EXTRACTORS.get(strategy, where)(reply, options, labels or make_labels(len(options)), pattern)
