"""Text normalizers for error rates: Whisper-style English, and a basic one for other languages."""

from __future__ import annotations

import re
import unicodedata

_BRACKETS = re.compile(r"[<\[][^>\]]*[>\]]|\([^)]*\)")
_FILLERS = re.compile(r"\b(hmm+|mm+|mhm|uh+|um+|erm|uh-huh)\b")

_CONTRACTIONS = [
    (r"\bwon't\b", "will not"), (r"\bcan't\b", "can not"), (r"\blet's\b", "let us"), (r"\bain't\b", "aint"),
    (r"\by'all\b", "you all"), (r"\bwanna\b", "want to"), (r"\bgotta\b", "got to"), (r"\bgonna\b", "going to"),
    (r"\bi'ma\b", "i am going to"), (r"\bimma\b", "i am going to"), (r"\bwoulda\b", "would have"),
    (r"\bcoulda\b", "could have"), (r"\bshoulda\b", "should have"), (r"\bma'am\b", "madam"),
    (r"\bmr\b", "mister "), (r"\bmrs\b", "missus "), (r"\bst\b", "saint "), (r"\bdr\b", "doctor "),
    (r"\bprof\b", "professor "), (r"\bjr\b", "junior "), (r"\bsr\b", "senior "),
    (r"n't\b", " not"), (r"'re\b", " are"), (r"'s been\b", " has been"), (r"'d been\b", " had been"),
    (r"'ll\b", " will"), (r"'ve\b", " have"), (r"'m\b", " am"), (r"'d\b", " would"),
]
_CONTRACTIONS = [(re.compile(p), r) for p, r in _CONTRACTIONS]

# The most frequent British spellings; both sides of a comparison get the same form.
_SPELLINGS = {
    "colour": "color", "colours": "colors", "favourite": "favorite", "favourites": "favorites",
    "honour": "honor", "labour": "labor", "neighbour": "neighbor", "neighbours": "neighbors",
    "behaviour": "behavior", "centre": "center", "centres": "centers", "theatre": "theater",
    "metre": "meter", "metres": "meters", "litre": "liter", "litres": "liters", "organise": "organize",
    "organised": "organized", "realise": "realize", "realised": "realized", "recognise": "recognize",
    "recognised": "recognized", "apologise": "apologize", "analyse": "analyze", "travelled": "traveled",
    "travelling": "traveling", "cancelled": "canceled", "defence": "defense", "licence": "license",
    "grey": "gray", "programme": "program", "programmes": "programs", "catalogue": "catalog",
    "dialogue": "dialog", "cheque": "check", "tyre": "tire", "tyres": "tires", "mum": "mom",
}

_ONES = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_ONES["oh"] = 0
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_ORDINALS = {
    "first": ("one", "st"), "second": ("two", "nd"), "third": ("three", "rd"), "fifth": ("five", "th"),
    "eighth": ("eight", "th"), "ninth": ("nine", "th"), "twelfth": ("twelve", "th"),
}
_SUFFIX = {1: "st", 2: "nd", 3: "rd"}


def _ordinal(word: str) -> tuple[str, str] | None:
    if word in _ORDINALS:
        return _ORDINALS[word]
    if word.endswith("ieth") and word[:-4] + "y" in _TENS:
        return word[:-4] + "y", "th"
    if word.endswith("th") and (word[:-2] in _ONES or word[:-2] in _SCALES):
        return word[:-2], "th"
    return None


class _Number:
    """Accumulates number words: 'twenty one' → 21, 'two thousand and five' → 2005."""

    def __init__(self) -> None:
        self.total, self.current, self.last = 0, 0, ""

    def accepts(self, word: str) -> bool:
        if word in _SCALES:
            return self.last in ("ones", "tens") or (self.last == "scale" and word in ("thousand", "million", "billion", "trillion"))
        if word in _TENS:
            return self.last in ("", "scale")
        if word in _ONES:
            small = _ONES[word] < 10
            return self.last in ("", "scale") or (self.last == "tens" and small and word != "zero" and word != "oh")
        return False

    def add(self, word: str) -> None:
        if word in _SCALES:
            scale = _SCALES[word]
            if scale == 100:
                self.current = max(self.current, 1) * 100
            else:
                self.total += max(self.current, 1) * scale
                self.current = 0
            self.last = "scale"
        else:
            self.current += _TENS.get(word, _ONES.get(word, 0))
            self.last = "tens" if word in _TENS else "ones"

    def value(self) -> int:
        return self.total + self.current


def _decimal(words: list[str], i: int, whole: int, out: list[str]) -> int:
    """'three point one four' → '3.14'; returns the index after the last digit word."""
    digits = ""
    i += 1
    while i < len(words) and words[i] in _ONES and _ONES[words[i]] < 10:
        digits += str(_ONES[words[i]])
        i += 1
    out.append(f"{whole}.{digits}")
    return i


def _numbers(words: list[str]) -> list[str]:
    out: list[str] = []
    number: _Number | None = None
    i = 0
    while i < len(words):
        word = words[i]
        ordinal = _ordinal(word)
        base = ordinal[0] if ordinal else word
        if number is not None and word == "and" and i + 1 < len(words) and number.last == "scale" and number.accepts(words[i + 1]):
            i += 1
            continue
        if number is not None and word == "point" and i + 1 < len(words) and words[i + 1] in _ONES:
            i = _decimal(words, i, number.value(), out)
            number = None
            continue
        if number is not None and not number.accepts(base):
            out.append(str(number.value()))
            number = None
        if base in _ONES or base in _TENS or (base in _SCALES and number is not None):
            number = number or _Number()
            number.add(base)
            if ordinal:
                value = number.value()
                out.append(f"{value}{_SUFFIX.get(value % 10, 'th') if value % 100 not in (11, 12, 13) else 'th'}")
                number = None
        else:
            out.append("%" if word == "percent" and out and out[-1][-1:].isdigit() else word)
        i += 1
    if number is not None:
        out.append(str(number.value()))
    return _attach_percent(out)


def _attach_percent(words: list[str]) -> list[str]:
    out: list[str] = []
    for word in words:
        if word == "%" and out:
            out[-1] += "%"
        else:
            out.append(word)
    return out


def _strip_symbols(text: str, keep: str = "") -> str:
    text = unicodedata.normalize("NFKD", text)
    out = []
    for ch in text:
        category = unicodedata.category(ch)
        if category == "Mn":
            continue
        out.append(ch if ch in keep or not category.startswith(("P", "S")) else " ")
    return "".join(out)


def normalize_english(text: str) -> str:
    """Whisper-style English normalization: case, brackets, fillers, contractions, spellings, numbers."""
    text = text.lower()
    text = _BRACKETS.sub(" ", text)
    text = _FILLERS.sub(" ", text)
    text = re.sub(r"\s+'", "'", text).replace("’", "'")
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = re.sub(r"(\d),(\d)", r"\1\2", text)
    text = re.sub(r"\.([^0-9]|$)", r" \1", text)
    text = _strip_symbols(text, keep=".%'")
    text = text.replace("'", " ")
    words = [_SPELLINGS.get(w, w) for w in text.replace("-", " ").split()]
    return " ".join(_numbers(words))


def normalize_basic(text: str) -> str:
    """Language-neutral normalization: NFKC, case, brackets removed, punctuation and symbols to spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = _BRACKETS.sub(" ", text)
    text = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text)
    return " ".join(text.split())
