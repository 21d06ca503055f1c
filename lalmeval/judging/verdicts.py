"""Reading a judge's verdict by a strict grammar: a rating on a scale (0-5, 1-10, 0/1) or a label (yes/no).

A verdict is read only from a *statement*, never from any number that happens to stand in the
reply. Statements come in three tiers; the first tier that holds any statement decides:

  0. a statement labelled final: "Final rating: 4", "my final score is 4", "最终评分：4";
  1. a labelled statement: "Rating: 4", "Score = 4/5", "评分：4", a JSON object's "rating" or
     "score", "[[4]]", a line holding only the rating ("4", "**4/5**"); for labels
     "Result: yes", "[Correct]", a line holding only the label, a line opening with it ("No, ...");
  2. a statement in prose: "I would rate this a 4", "a score of 4 out of 5", "得分是[4]",
     "the answer is correct".

Within the deciding tier every statement must agree, otherwise the judgment is ambiguous: a later
mention never silently wins. Echoed scales are skipped, not read: "(0-5)", "[1-10]", "/5",
"out of 5", "on a scale of 0 to 5", "0-5", "yes or no". The value read must be on the template's
scale: an integer, within it, and a stated denominator ("4/10") must be the scale's top.

A template may instead read its verdict the way its peer does (`read`, see READINGS at
the end), so that lalmeval's numbers and the peer's agree reply for reply; a reply from which the
peer's own reading gets no verdict is still a failure here, never a 0.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

_FINAL_TIER, _LABELLED_TIER, _LINE_TIER, _PROSE_TIER = 0, 1, 2, 3
_NOT_AFTER_LETTER = r"(?<![A-Za-z0-9_-])"  # a label starts a word (Chinese labels may follow Chinese text)
_QUOTE_LIMIT = 60  # characters of a statement quoted in a failure reason
STATEMENT = "statement"  # the default reading: the grammar above


@dataclass(frozen=True)
class Scale:
    """Ratings are the integers low..high."""

    low: int
    high: int
    read: str = STATEMENT

    @property
    def binary(self) -> bool:
        return (self.low, self.high) == (0, 1)

    def describe(self) -> str:
        return "0 or 1" if self.binary else f"{self.low}-{self.high}"


@dataclass(frozen=True)
class Labels:
    """The verdict is one of these words (any case), each worth a value: {"yes": 1, "no": 0}."""

    values: dict[str, int]
    read: str = STATEMENT

    @property
    def binary(self) -> bool:
        return set(self.values.values()) == {0, 1}

    def describe(self) -> str:
        return " or ".join(self.values)


Verdict = Union[Scale, Labels]


@dataclass(frozen=True)
class Reading:
    """What a judgment says: a value on the verdict's scale, or the problem that prevents reading one."""

    value: Optional[Union[int, float]] = None  # a fraction only where a peer's reading keeps one (4.5)
    problem: Optional[str] = None
    note: Optional[str] = None  # how it was read when that needs saying: a revision that replaced an earlier rating


@dataclass(frozen=True)
class _Statement:
    tier: int
    value: Any          # a number (ratings) or a lower-case word (labels); None: a value that is no rating
    text: str           # the statement as written, quoted in failure reasons
    denominator: Optional[int] = None
    revision: bool = False  # a rating the judge marks as replacing an earlier one ("Revised rating: 3", "Final: 3")


# A judge answers many samples in the same few words ("Rating: 1", "Correct."): the readings of recent short
# replies on a scale are kept, at most CACHED_READINGS of them (a reading is a pure function of the reply and the
# scale, and frozen; a Labels verdict holds a dict, so it cannot be a key and is read every time).
CACHED_READINGS = 2048
CACHED_CHARS = 1000


def read_verdict(reply: str, verdict: Verdict) -> Reading:
    """The verdict of a judge's reply, read as `verdict.read` says (the grammar of the module docstring by default)."""
    if isinstance(verdict, Scale) and len(reply or "") <= CACHED_CHARS:
        return _recent_verdict(reply, verdict)
    return _read(reply, verdict)


@functools.lru_cache(maxsize=CACHED_READINGS)
def _recent_verdict(reply: str, verdict: Scale) -> Reading:
    """`_read`, kept for the CACHED_READINGS replies read last."""
    return _read(reply, verdict)


def _read(reply: str, verdict: Verdict) -> Reading:
    """read_verdict, every time."""
    text, problem = _visible(reply)
    if problem:
        return Reading(problem=problem)
    return READINGS[verdict.read](text, verdict)


def _by_statement(text: str, verdict: Verdict) -> Reading:
    """The verdict the reply's statements agree on, in the first tier holding any."""
    blanked, objects = _json_objects(text)
    cleaned = _spelled_ratings(_demarkdown(blanked))
    if isinstance(verdict, Scale):
        found = [s for obj, raw in objects for s in _json_ratings(obj, raw, verdict)] + _rating_statements(cleaned)
    else:
        found = [s for obj, raw in objects for s in _json_labels(obj, raw, verdict)] + _label_statements(cleaned, verdict)
    found += _correctness_statements(cleaned, verdict) + _revisions(cleaned, verdict)
    if not found:
        return Reading(problem=_nothing_found(cleaned, verdict))
    tier = min(s.tier for s in found)
    deciding = [s for s in found if s.tier == tier]
    values = {s.value for s in deciding}
    if len(values) > 1:
        first, other = deciding[0], next(s for s in deciding if s.value != deciding[0].value)
        kind = "ratings" if isinstance(verdict, Scale) else "verdicts"
        return Reading(problem=f"ambiguous judgment: two different {kind}, {_quote(first.text)} and {_quote(other.text)}")
    reading = _on_scale(deciding, verdict)
    replaced = [s for s in found if s.tier > tier and s.value != deciding[0].value]
    if reading.problem is None and tier == _FINAL_TIER and replaced and any(s.revision for s in deciding):
        return Reading(value=reading.value, note=f"revised: {_quote(replaced[0].text)} replaced by {_quote(deciding[0].text)}")
    return reading


def _on_scale(statements: list[_Statement], verdict: Verdict) -> Reading:
    """The agreed value, if it is one the verdict allows."""
    value, text = statements[0].value, statements[0].text
    if isinstance(verdict, Labels):
        return Reading(value=verdict.values[value])
    if value is None:
        return Reading(problem=f"rating not a number: {_quote(text)}")
    for s in statements:
        if s.denominator is not None and s.denominator != verdict.high:
            return Reading(problem=f"rating on another scale: {_quote(s.text)} (this judge rates {verdict.describe()})")
    if value != int(value):
        return Reading(problem=f"rating not an integer: {value:g} in {_quote(text)} (the scale is {verdict.describe()})")
    if not verdict.low <= value <= verdict.high:
        return Reading(problem=f"rating outside the scale: {value:g} in {_quote(text)} (the scale is {verdict.describe()})")
    return Reading(value=int(value))


# --- what of the reply is read ------------------------------------------------------------------

_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_START = re.compile(r"<think\s*>", re.IGNORECASE)


def _visible(reply: str) -> tuple[str, Optional[str]]:
    """The reply after its reasoning block, in compatibility form (full-width digits and colons
    become plain ones), or the problem that leaves nothing to read."""
    text = unicodedata.normalize("NFKC", reply or "")
    ends = list(_THINK_END.finditer(text))
    if ends:
        text = text[ends[-1].end():]
    elif _THINK_START.search(text):
        return "", "unparseable judgment: the reasoning (<think>) never ended, so no verdict was given"
    text = text.replace("\u2212", "-").replace("\u2044", "/")  # the minus sign NFKC keeps; ½ becomes 1⁄2, a fraction
    if not text.strip():
        return "", "unparseable judgment: empty reply"
    return text, None


_EMPHASIS = re.compile(r"\*+|`+|__|^[ \t]*#+[ \t]*|^[ \t]*>[ \t]?", re.MULTILINE)


def _demarkdown(text: str) -> str:
    """Markdown emphasis, code marks, headings and quote marks removed: "**Rating:** 4" is "Rating: 4"."""
    return _EMPHASIS.sub("", text)


_OBJECT = re.compile(r"\{[^{}]{0,4000}\}")


def _json_objects(text: str) -> tuple[str, list[tuple[dict, str]]]:
    """Every JSON object (braces inside its strings allowed) or flat Python-literal object of the reply, and the
    reply with them blanked out, so that an explanation inside the object is never read as a statement of its own."""
    found: list[tuple[dict, str]] = []
    pieces, last, start = [], 0, text.find("{")
    while start != -1:
        span = _object_at(text, start)
        if span is None:
            start = text.find("{", start + 1)
            continue
        end, obj = span
        found.append((obj, text[start:end]))
        pieces += [text[last:start], " "]
        last = end
        start = text.find("{", end)
    pieces.append(text[last:])
    return "".join(pieces), found


_DECODER = json.JSONDecoder()


def _object_at(text: str, start: int) -> Optional[tuple[int, dict]]:
    """(end, object) of the JSON or flat Python-literal object opening at `start`, None when there is none."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except ValueError:
        match = _OBJECT.match(text, start)
        obj = _as_object(match.group(0)) if match else None
        return (match.end(), obj) if obj is not None else None
    if not isinstance(value, dict):
        return None
    return end, {str(k).strip().lower(): v for k, v in value.items()}


def _as_object(raw: str) -> Optional[dict]:
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            return {str(k).strip().lower(): v for k, v in value.items()}
    return None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return f'"{text[:_QUOTE_LIMIT]}…"' if len(text) > _QUOTE_LIMIT else f'"{text}"'


# --- ratings ------------------------------------------------------------------------------------

_NUM = r"(?P<num>-?\d{1,6}(?:\.\d{1,6})?)"
_TO = r"[ \t]*(?:-|–|to)[ \t]*"
# The scale a judge states after its rating, whose top is the rating's denominator: "/5", "out of 5", "of 10",
# "out of a possible 10", "(out of 5)", "on a scale of 1 to 10", "(scale 0-10)", "(1-10)", "on a 10-point scale", "(满分10分)".
_STATED_SCALE = (r"(?:[ \t]*/[ \t]*(?P<den>\d{1,6})"
                 r"|[ \t]*\(?[ \t]*(?:out[ \t]+)?of[ \t]+(?:a[ \t]+(?:possible|maximum[ \t]+of)[ \t]+)?(?P<den2>\d{1,6})[ \t]*\)?"
                 r"|[ \t]*\(?[ \t]*(?:on[ \t]+)?(?:a[ \t]+|the[ \t]+)?(?:scale[ \t]+(?:of[ \t]+|from[ \t]+)?\d{1,6}" + _TO + r"(?P<den3>\d{1,6})"
                 r"|\d{1,6}" + _TO + r"(?P<den4>\d{1,6})[ \t]*(?:-[ \t]*)?(?:point[ \t]+)?scale|(?P<den5>\d{1,6})[ \t]*-?[ \t]*point[ \t]+scale)[ \t]*\)?"
                 r"|[ \t]*\([ \t]*\d{1,6}" + _TO + r"(?P<den6>\d{1,6})[ \t]*\)"
                 r"|[ \t]*分?[ \t]*\(?[ \t]*满分[ \t]*(?P<den7>\d{1,6})[ \t]*分?[ \t]*\)?)")
# A number possibly wrapped ([[4]], [4], (4)), then units and an echoed scale (4 stars out of 5, 4/5 points, 4分).
_WRAPPED = (r"[\[(]{0,2}[ \t]*" + _NUM + r"[ \t]*[\])]{0,2}(?:[ \t]*(?:stars?|points?|pts?)(?=[ \t]+(?:out[ \t]+)?of\b))?"
            + _STATED_SCALE + r"?(?:[ \t]*(?:stars?|points?|pts?|分)\b|[ \t]*分)?")
# What may follow a rating: not a range ("0-5", "1 to 10"), not a rubric line ("Score 4:"), not more digits or letters.
_AFTER = r"(?![ \t]*(?:[-–—~]|to\b)[ \t]*\d)(?![ \t]*[:%])(?![.,]\d)(?!\w)"
_LABEL = r"(?:rating|score|grade|mark|verdict|评分|得分|分数|打分|评级)"
_FINAL = r"(?P<final>final|overall|total|最终|最后)?[ \t]*"
# An echoed scale between the label and its colon: "(0-5)", "[1-10]", "on a scale of 0 to 5", "out of 5".
_ECHO = (r"(?:[ \t]*(?:\([^()\n]{0,40}\)|\[[^\[\]\n]{0,40}\]|on[ \t]+a[ \t]+scale[ \t]+(?:of|from)[ \t]+\d+[ \t]*(?:-|–|to)[ \t]*\d+"
         r"|out[ \t]+of[ \t]+\d+|from[ \t]+\d+[ \t]*(?:-|–|to)[ \t]*\d+))?")
_SEP = r"(?:[ \t]*[:=][ \t]*|[ \t]+[-–—][ \t]+)"
# An echo of the asked format after the colon: "Rating: (an integer from 0 to 5) 4", "Rating: (int): 4".
_ECHO_AFTER = r"(?:\([^()\n]{0,40}\)[ \t]*[:=]?[ \t]*)?"

_LABELLED = re.compile(_NOT_AFTER_LETTER + _FINAL + _LABEL + _ECHO + _SEP + _ECHO_AFTER + _WRAPPED + _AFTER, re.IGNORECASE)
_DOUBLE_BRACKETS = re.compile(r"\[\[[ \t]*" + _NUM + r"[ \t]*\]\](?:[ \t]*/[ \t]*(?P<den>\d{1,6}))?" + _AFTER)
_BOXED = re.compile(r"\\boxed\{[ \t]*" + _NUM + r"[ \t]*(?:/[ \t]*(?P<den>\d{1,6}))?[ \t]*\}")
_LONE = re.compile(r"^[ \t]*[\"'“”]?" + _WRAPPED + r"[\"'“”]?[ \t]*[.!]?[ \t]*$", re.MULTILINE | re.IGNORECASE)
# Prose: "a rating of 3", "the score is 4/5", "my final rating is 4".
_PROSE_LABEL = re.compile(_NOT_AFTER_LETTER + _FINAL + _LABEL + r"[ \t]+(?:is|of|would[ \t]+be|will[ \t]+be|should[ \t]+be|as|=)[ \t]+(?:a[ \t]+|an[ \t]+)?"
                          + _WRAPPED + _AFTER, re.IGNORECASE)
# "I would rate this a 4", "I'd rate the response 3 out of 5" — any number after a form of "rate".
_RATE_VERB = re.compile(_NOT_AFTER_LETTER + r"(?:rate|rated|rating)[ \t]+(?:(?:it|this|that|the|answer|response|reply|model'?s?|candidate'?s?|one|overall|as|at|with)[ \t]+){0,4}"
                        r"(?:a[ \t]+|an[ \t]+)?" + _WRAPPED + _AFTER, re.IGNORECASE)
# "I would give it a 4.", "deserves a 5/5" — other verbs only with an article, a scale or a sentence end after the number.
_OTHER_VERB = re.compile(_NOT_AFTER_LETTER + r"(?:give|gives|giving|gave|assign|assigns|assigned|award|awards|awarded|deserves?|earns?|merits?|warrants?|gets?|receives?|scores?|scored)[ \t]+"
                         r"(?:(?:it|this|that|the|answer|response|reply|model'?s?|candidate'?s?|one|overall|score|rating|of|final)[ \t]+){0,4}"
                         r"(?:(?:a|an)[ \t]+" + _WRAPPED + _AFTER + r"|" + _WRAPPED.replace("?P<", "?P<v_") + r"(?=[ \t]*(?:[.!;,\n]|$)))",
                         re.IGNORECASE)
_CHINESE_PROSE = re.compile(r"(?:" + _FINAL + r"(?:评分|得分|分数)[ \t]*(?:为|是|应为|应该是|给出)[ \t]*" + _WRAPPED
                            + r"|(?:给|打|给出|得)[ \t]*(?P<cn>\d{1,3})[ \t]*分)" + r"(?![.,]\d)(?!\d)")


def _number(match: re.Match) -> tuple[Optional[float], Optional[int]]:
    """(value, stated denominator) of a matched rating."""
    groups = {k.removeprefix("v_"): v for k, v in match.groupdict().items() if v is not None}
    raw = groups.get("num") or groups.get("cn")
    den = next((value for name, value in groups.items() if name.startswith("den")), None)
    return (float(raw) if raw is not None else None), (int(den) if den else None)


def _rating_statements(text: str) -> list[_Statement]:
    """Every rating statement of the (JSON-blanked, de-markdowned) reply, with its tier."""
    out: list[_Statement] = []
    for pattern, tier in ((_LABELLED, _LABELLED_TIER), (_DOUBLE_BRACKETS, _LABELLED_TIER), (_BOXED, _LABELLED_TIER), (_LONE, _LINE_TIER),
                          (_PROSE_LABEL, _PROSE_TIER), (_RATE_VERB, _PROSE_TIER), (_OTHER_VERB, _PROSE_TIER), (_CHINESE_PROSE, _PROSE_TIER)):
        for match in pattern.finditer(text):
            value, den = _number(match)
            if value is None:
                continue
            final = bool(match.groupdict().get("final"))
            out.append(_Statement(_FINAL_TIER if final else tier, value, match.group(0), den))
    return out


_JSON_RATING_KEYS = {"rating": False, "score": False, "grade": False, "final_rating": True, "final_score": True,
                     "overall_rating": True, "overall_score": True}
_NUMBER_TEXT = re.compile(r"^[ \t]*" + _WRAPPED + r"[ \t]*$", re.IGNORECASE)


def _json_ratings(obj: dict, raw: str, verdict: Scale) -> list[_Statement]:
    """A JSON object's rating: "rating" / "score" (or final_score, ...) holding a number or a number as text
    (a boolean too when the scale is 0/1)."""
    out = []
    for key, final in _JSON_RATING_KEYS.items():
        if key not in obj:
            continue
        value, den = obj[key], None
        if isinstance(value, str) and (match := _NUMBER_TEXT.match(_spelled_ratings(unicodedata.normalize("NFKC", value), lone=True))):
            value, den = _number(match)
        elif isinstance(value, bool) and verdict.binary:
            value = int(value)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            value = None  # true, null, "good": a rating field that holds no rating
        out.append(_Statement(_FINAL_TIER if final else _LABELLED_TIER, value, raw, den))
    return out


# --- labels (yes/no, CORRECT/INCORRECT) ---------------------------------------------------------

# "Answer:" / "Final answer:" / "My answer:" is a verdict; an answer or output some word qualifies ("Model Answer:",
# "The model's answer:", "Predicted answer:", "Correct answer:", "Expected output:") is the judge echoing its input.
_UNQUALIFIED = r"(?:(?<![\w'’ \t])|(?<![\w'’][ \t])(?<=[ \t])|(?<=\bfinal[ \t])|(?<=\bmy[ \t])|(?<=\bthe[ \t])|(?<=\bour[ \t]))"
_VERDICT_KEY = (r"(?:result|" + _UNQUALIFIED + r"(?:answer|output)|judge?ment|verdict|decision|conclusion|evaluation|assessment|rating|score"
                r"|grade|结果|判断|结论)")
_OPEN = r"[\"'“”‘’\[(]{0,2}[ \t]*"
_CLOSE = r"[ \t]*[\"'“”‘’\])]{0,2}"


def _label_patterns(words: str) -> list[tuple[re.Pattern, int]]:
    echo = r"(?![ \t]*[\"'“”‘’\])]{0,2}[ \t]*(?:or|/|\||、|and)[ \t]*" + _OPEN + r"(?:" + words + r")\b)"
    word = r"(?P<word>" + words + r")\b" + echo
    return [
        (re.compile(_NOT_AFTER_LETTER + r"(?P<final>final[ \t]+)?" + _VERDICT_KEY + _SEP + _OPEN + word, re.IGNORECASE), _LABELLED_TIER),
        (re.compile(r"\[[ \t]*" + word + r"[ \t]*\]", re.IGNORECASE), _LABELLED_TIER),
        (re.compile(r"^[ \t]*(?:[-•][ \t]*)?" + _OPEN + word + _CLOSE + r"[ \t]*[.!]?[ \t]*$", re.IGNORECASE | re.MULTILINE), _LABELLED_TIER),
        # A line opening with the word ("No, the model ..."); not the key of a key: value line ("Correct: no", "Correct: false").
        (re.compile(r"^[ \t]*(?:[-•][ \t]*)?" + _OPEN + word + _CLOSE + r"[ \t]*(?:[.!,;—–-]|:(?![ \t]*(?:no|not|false|yes|true|[01])\b))",
                    re.IGNORECASE | re.MULTILINE), _LINE_TIER),
        # The label as the last sentence of a line: "... matching the official answer. CORRECT"
        (re.compile(r"[.!?][ \t]+" + _OPEN + word + _CLOSE + r"[ \t]*[.!]?[ \t]*$", re.IGNORECASE | re.MULTILINE), _LABELLED_TIER),
        (re.compile(_NOT_AFTER_LETTER + r"(?:is|be|was|as)[ \t]+" + _OPEN + word, re.IGNORECASE), _PROSE_TIER),
    ]


def _label_statements(text: str, verdict: Labels) -> list[_Statement]:
    words = "|".join(re.escape(w) for w in sorted(verdict.values, key=len, reverse=True))
    out = []
    for pattern, tier in _label_patterns(words):
        for match in pattern.finditer(text):
            final = bool(match.groupdict().get("final"))
            out.append(_Statement(_FINAL_TIER if final else tier, match.group("word").lower(), match.group(0)))
    return out


_JSON_LABEL_KEYS = ("judgment", "judgement", "verdict", "result", "answer", "decision", "correct")


def _json_labels(obj: dict, raw: str, verdict: Labels) -> list[_Statement]:
    """A JSON object's verdict: "judgment" (or verdict, result, ...) holding one of the words."""
    out = []
    by_value = {v: w for w, v in reversed(list(verdict.values.items()))}
    for key in _JSON_LABEL_KEYS + ("score", "rating"):
        value = obj.get(key)
        if isinstance(value, str) and value.strip().strip(".").lower() in verdict.values:
            out.append(_Statement(_LABELLED_TIER, value.strip().strip(".").lower(), raw))
        elif isinstance(value, bool) and verdict.binary:
            out.append(_Statement(_LABELLED_TIER, by_value[int(value)], raw))
    return out


# --- spelled ratings, correct/incorrect, revisions ---------------------------------------------

_SPELLED = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
# Only where a rating ends its statement: "Rating: one of the best" is no rating.
_SPELLED_WORD = (r"(?P<spelled>" + "|".join(_SPELLED) + r")\b"
                 r"(?=[ \t]*(?:$|[.!,;)\]/]|out[ \t]+of\b|of[ \t]+\w+[ \t]*(?:$|[.!,;)])|\(|points?\b|stars?\b))")
# A spelled number where a rating stands: after a rating label ("Rating: five"), alone, or "five out of five".
_SPELLED_AFTER_LABEL = re.compile(r"(?P<head>" + _NOT_AFTER_LETTER + r"(?:final[ \t]+|revised[ \t]+|overall[ \t]+)?" + _LABEL + _ECHO + _SEP
                                  + r"|[ \t]+(?:out[ \t]+)?of[ \t]+|/[ \t]*)" + _SPELLED_WORD, re.IGNORECASE | re.MULTILINE)
_SPELLED_LONE = re.compile(r"^[ \t]*" + _SPELLED_WORD + r"[ \t]*[.!]?[ \t]*$", re.IGNORECASE | re.MULTILINE)


def _spelled_ratings(text: str, lone: bool = False) -> str:
    """Spelled numbers where a rating stands written as digits ("Rating: five" → "Rating: 5"); other words stay."""
    digit = lambda m: f"{m.groupdict().get('head') or ''}{_SPELLED[m.group('spelled').lower()]}"  # noqa: E731
    text = _SPELLED_AFTER_LABEL.sub(digit, text)
    text = _SPELLED_AFTER_LABEL.sub(digit, text)  # "five out of five": the denominator after the rating
    return _SPELLED_LONE.sub(digit, text) if lone or "\n" in text or _SPELLED_LONE.fullmatch(text) else text


_CORRECTNESS = re.compile(r"^[ \t]*(?:(?:final[ \t]+)?(?:verdict|judge?ment|result|evaluation|assessment)[ \t]*:[ \t]*)?"
                          r"[\[(]?(?P<word>correct|incorrect)[\])]?[ \t]*[.!]?[ \t]*$", re.IGNORECASE | re.MULTILINE)


def _correctness_statements(text: str, verdict: Verdict) -> list[_Statement]:
    """On a binary template, a line saying only "Correct." or "Incorrect." is its 1 or 0."""
    if not verdict.binary or (isinstance(verdict, Labels) and "correct" in verdict.values):
        return []
    out = []
    for match in _CORRECTNESS.finditer(text):
        value = 0 if match.group("word").lower() == "incorrect" else 1
        if isinstance(verdict, Labels):
            value = next(w for w, v in verdict.values.items() if v == value)
        out.append(_Statement(_LABELLED_TIER, value, match.group(0)))
    return out


# "Final: 3", "Revised rating: 3", "Updated score - 3": a rating the judge marks as replacing what it said before.
_REVISION_WORD = r"(?:final|revised|updated|corrected|amended)"
_REVISED = re.compile(r"(?:" + _NOT_AFTER_LETTER + _REVISION_WORD + r"[ \t]+(?:" + _LABEL[3:-1] + r"|verdict|judge?ment)"
                      + r"|(?:^|(?<=[.!?])[ \t])[ \t]*" + _REVISION_WORD + r")"  # a bare "Final:" only where a sentence starts
                      + _ECHO + _SEP + _ECHO_AFTER + _WRAPPED + _AFTER, re.IGNORECASE | re.MULTILINE)
# An explicit change of mind, after which a "[[n]]" replaces the one before.
_CHANGE_OF_MIND = re.compile(r"\b(?:on (?:second thought|reflection|re-?consideration)|actually,|wait,|let me (?:revise|reconsider|correct)"
                             r"|i (?:will|'ll|would|need to|should|must) (?:revise|change|correct|adjust|raise|lower|update)"
                             r"|i (?:revise|change|correct|adjust|raise|lower|update) my|revising|upon re-?evaluation|correction:)", re.IGNORECASE)


def _revisions(text: str, verdict: Verdict) -> list[_Statement]:
    """Ratings marked as revisions ("Final: 3", "Revised rating: 3"), and a "[[n]]" after an explicit change of
    mind that follows an earlier "[[m]]"; each is final: it replaces the earlier rating."""
    if not isinstance(verdict, Scale):
        return []
    out = []
    for match in _REVISED.finditer(text):
        value, den = _number(match)
        if value is not None:
            out.append(_Statement(_FINAL_TIER, value, match.group(0), den, revision=True))
    brackets = list(_DOUBLE_BRACKETS.finditer(text))
    turn = next((m for m in _CHANGE_OF_MIND.finditer(text) if brackets and m.start() > brackets[0].end()), None)
    for match in brackets:
        if turn is not None and match.start() > turn.end():
            value, den = _number(match)
            out.append(_Statement(_FINAL_TIER, value, match.group(0), den, revision=True))
    return out


# --- why nothing was read -----------------------------------------------------------------------

_BARE_LABEL = re.compile(_NOT_AFTER_LETTER + _FINAL + _LABEL + _ECHO + _SEP + r"[^\n]{0,40}", re.IGNORECASE)


def _nothing_found(text: str, verdict: Verdict) -> str:
    """Why no verdict was read: the reply names none, or only echoes the scale ("Rating (0-5):")."""
    if isinstance(verdict, Labels):
        return f"unparseable judgment: no verdict ({verdict.describe()}) found"
    echoed = _BARE_LABEL.search(text)
    if echoed:
        return f"unparseable judgment: {_quote(echoed.group(0))} holds no rating on the {verdict.describe()} scale"
    return f"unparseable judgment: no rating ({verdict.describe()}) found"


# --- the peers' own readings (a template's `read:`) ---------------------------------------------


def _whole_reply(text: str, verdict: Labels) -> Reading:
    """The whole reply, stripped, in any case, is one of the words (lmms-eval's VoiceBench sd-qa
    judge: `content.strip().lower() == "yes"`; anything else it scores 0, here it is a failure)."""
    word = text.strip().lower()
    if word in verdict.values:
        return Reading(value=verdict.values[word])
    return Reading(problem=f"unparseable judgment: the reply is not just {verdict.describe()}: {_quote(text)}")


def _last_line(text: str, verdict: Labels) -> Reading:
    """The last line of the reply holds one of the words anywhere, the first in the template's order
    winning (Kimi-Audio-Evalkit's collect_acc: "yes" in the line, else "no" in it — "not" holds
    "no"; a line holding neither is invalid there too, left out of its accuracy)."""
    line = text.strip().split("\n")[-1].strip()
    lowered = line.lower()
    for word, value in verdict.values.items():
        if word in lowered:
            return Reading(value=value)
    return Reading(problem=f"unparseable judgment: the last line holds no {verdict.describe()}: {_quote(line)}")


def _json_or_whole_reply(text: str, verdict: Labels) -> Reading:
    """The whole reply, or the string it is as JSON ('"CORRECT"'), in any case, is one of the words (AU-Harness's
    big_bench_audio judge: json.loads of the stripped reply, kept as text when that fails, then strip().upper() ==
    "CORRECT" / "INCORRECT"; anything else is a failure there too)."""
    word = text.strip()
    try:
        decoded = json.loads(word)
    except ValueError:
        decoded = None
    word = (decoded if isinstance(decoded, str) else word).strip().lower()
    if word in verdict.values:
        return Reading(value=verdict.values[word])
    return Reading(problem=f"unparseable judgment: the reply is not just {verdict.describe()}: {_quote(text)}")


_FIRST_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _first_number(text: str, verdict: Scale) -> Reading:
    """The first number anywhere in the reply (lmms-eval's VoiceBench open-answer judge, _parse_raw_score,
    which scores a reply without one 0); it must be a rating on the scale."""
    match = _FIRST_NUMBER.search(text)
    if match is None:
        return Reading(problem=f"unparseable judgment: no number in the reply (this judge reads the first one): {_quote(text)}")
    return _on_scale([_Statement(_LABELLED_TIER, float(match.group(0)), match.group(0))], verdict)


def _json_object(text: str, verdict: Scale) -> Reading:
    """The whole reply as one JSON object and its "score" (AU-Harness's llm_judge.py: json.loads of the stripped reply
    after its <think> blocks, then float(score); a reply that is not such an object, or has no score, scores 0 there
    and is a failure here). true / false are 1 / 0, as float() reads them."""
    try:
        obj = json.loads(text.strip())
    except ValueError:
        return Reading(problem=f"unparseable judgment: the reply is not one JSON object (this judge reads only that): {_quote(text)}")
    value = obj.get("score") if isinstance(obj, dict) else None
    if isinstance(value, bool):
        value = int(value)
    elif isinstance(value, str):  # float("1") is 1 there too
        try:
            value = float(value)
        except ValueError:
            value = None
    if not isinstance(value, (int, float)):
        return Reading(problem=f"unparseable judgment: the JSON object holds no numeric \"score\": {_quote(text)}")
    return _on_scale([_Statement(_LABELLED_TIER, float(value), text)], verdict)


def _first_digit(text: str, verdict: Scale) -> Reading:
    """The first digit of the scale anywhere in the reply (lmms-eval's AudioBench judges of alpaca_audio, openhermes and
    clotho_aqa search the pattern [0-5]), so "The reference answer is [answer 1] …" reads 1; a reply without one scores 0
    there and is a failure here)."""
    match = re.search(f"[{verdict.low}-{min(verdict.high, 9)}]", text)
    if match is None:
        return Reading(problem=f"unparseable judgment: no digit {verdict.describe()} in the reply (this judge reads the first one): {_quote(text)}")
    return _on_scale([_Statement(_LABELLED_TIER, float(match.group(0)), match.group(0))], verdict)


_RATING_AT_END = re.compile(r"Rating:\s*(\d)\s*$")


def _rating_at_end(text: str, verdict: Scale) -> Reading:
    """The "Rating: n" that ends the reply (lmms-eval's wavcaps and song_describer: Rating, optional spaces, a digit 0-5,
    optional spaces, the end); any other reply scores 0 there and is a failure here."""
    match = _RATING_AT_END.search(text)
    if match is None:
        return Reading(problem=f"unparseable judgment: the reply does not end with \"Rating: n\" (this judge reads only that): {_quote(text)}")
    return _on_scale([_Statement(_LABELLED_TIER, float(match.group(1)), match.group(0))], verdict)


def _first_number_in_halves(text: str, verdict: Scale) -> Reading:
    """The first number of the reply on a scale of half points (MixEval's freeform judge grades 0, 0.5 or 1; lmms-eval
    reads the first run of digits and dots), read as a count of halves: 0.5 is 1, 1 is 2 (the template's score
    multiplies the mean by 0.5 to print the points)."""
    match = _FIRST_NUMBER.search(text)
    if match is None:
        return Reading(problem=f"unparseable judgment: no number in the reply (this judge reads the first one): {_quote(text)}")
    return _on_scale([_Statement(_LABELLED_TIER, 2 * float(match.group(0)), match.group(0))], verdict)


_KIMI_RATING = re.compile(r"\[\[(\d+)\]\]")  # extract_rating's pattern


def _number_or_double_brackets(text: str, verdict: Scale) -> Reading:
    """The whole reply as one number, else the first "[[n]]" in it (Kimi-Audio-Evalkit's open-QA judge: float() of the
    stripped reply, else extract_rating's first [[digits]]; a reply with neither is left out there as invalid, and is
    a failure here). A fraction such as 4.5 counts as written, as float() reads it; a number off the scale (or nan)
    is a failure here, where Kimi would add it."""
    try:
        value = float(text.strip())
    except ValueError:
        match = _KIMI_RATING.search(text)
        if match is None:
            return Reading(problem=f"unparseable judgment: neither a bare number nor \"[[n]]\" (this judge reads only those): {_quote(text)}")
        value = float(match.group(1))
    if not verdict.low <= value <= verdict.high:  # nan fails this too
        return Reading(problem=f"rating outside the scale: {_quote(text)} (the scale is {verdict.describe()})")
    return Reading(value=int(value) if value == int(value) else value)


_MT_BENCH_RATING = re.compile(r"\[\[?\s*(\d+(?:\.\d+)?)\s*\]?\]")


def _bracketed_or_first_number(text: str, verdict: Scale) -> Reading:
    """The first "[[n]]" (or "[n]", "[[n]", "[n]]"), else the first number anywhere (AU-Harness's MT-Bench judge,
    MtbenchLLMJudgeMetric._score_once, which scores a reply without any number 0; a failure here). A fraction counts
    as written; a number off the scale is a failure here, where AU-Harness would add it."""
    match = _MT_BENCH_RATING.search(text) or _FIRST_NUMBER.search(text)
    if match is None:
        return Reading(problem=f"unparseable judgment: no number in the reply (this judge reads \"[[n]]\", else the first number): {_quote(text)}")
    value = float(match.group(match.lastindex or 0))
    if not verdict.low <= value <= verdict.high:
        return Reading(problem=f"rating outside the scale: {value:g} in {_quote(text)} (the scale is {verdict.describe()})")
    return Reading(value=int(value) if value == int(value) else value)


# How a verdict may be read (a template's `read:`), and the kind of verdict each reading reads
# (None: both ratings and words).
READINGS: dict[str, Callable[[str, Any], Reading]] = {
    STATEMENT: _by_statement, "whole_reply": _whole_reply, "last_line": _last_line, "first_number": _first_number,
    "first_number_in_halves": _first_number_in_halves, "json_object": _json_object, "first_digit": _first_digit,
    "rating_at_end": _rating_at_end, "number_or_double_brackets": _number_or_double_brackets,
    "bracketed_or_first_number": _bracketed_or_first_number, "json_or_whole_reply": _json_or_whole_reply,
}
READS: dict[str, Optional[type]] = {STATEMENT: None, "whole_reply": Labels, "last_line": Labels, "first_number": Scale,
                                    "first_number_in_halves": Scale, "json_object": Scale, "first_digit": Scale, "rating_at_end": Scale,
                                    "number_or_double_brackets": Scale, "bracketed_or_first_number": Scale,
                                    "json_or_whole_reply": Labels}
