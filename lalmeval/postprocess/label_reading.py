"""Careful reading of a label reply: which one label of a fixed set ('The speaker sounds happy.' → joy) it names.

A label is named by its own words (the label, each part of 'cafe/restaurant', the label without
its spaces), by the words of the concepts those words name in label_synonyms.yaml (happy /
happiness / joy, woman / female, laughing / laughter), by a runspec's `label_synonyms`, and by the
plural forms of all of these. A word that would name two labels of the set names
neither; a label's own word always names that label.

A mention right after a negation ("not happy", "no sign of anger", "rather than sad", 不是开心)
is no answer; nor is one the reply asks about rather than states: in a question ("Happy or sad? I'd go
with sad." is sad) or after "whether"/"if" ("I can't tell whether the speaker is male"). A reply that names exactly one label (once or more) is that label; one that names
none, or two different labels, is unreadable: scored wrong and counted, never guessed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Optional

import yaml

SHIPPED = Path(__file__).with_name("label_synonyms.yaml")

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+|[,.;:!?，。；：！？]")
_BREAKS = {",", ".", ";", ":", "!", "?", "，", "。", "；", "：", "！", "？", "but", "however", "yet", "instead", "though", "although", "and", "it", "its", "is"}
_NEGATORS = {"not", "no", "never", "neither", "nor", "without", "hardly", "unlike", "except", "non"}
_NEGATING_PAIRS = {("rather", "than"), ("instead", "of"), ("other", "than"), ("as", "opposed")}
_NEGATORS_ZH = ("不是", "并非", "並非", "而非", "没有", "沒有", "不像", "不", "没", "沒", "非")
_CLAUSE_ENDS = frozenset({",", ".", ";", ":", "!", "?", "，", "。", "；", "：", "！", "？"})
_SENTENCE_ENDS = frozenset({".", "!", "?", "。", "！", "？"})
_ASKING = frozenset({"whether", "if"})
NEGATION_REACH = 4  # tokens a negation reaches forward ("not very happy", "not the sound of laughter")


def tokens(text: str) -> list[str]:
    """Casefolded, accent-free words of a text (each CJK character one token, sentence marks kept as tokens)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("n't", " not").replace("n’t", " not")
    text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return _TOKEN.findall(text)


def _inflections(word: str) -> set[str]:
    """Plural forms of a one-word ASCII term (sneeze → sneezes, bus → buses, party → parties). Not -ing or -ed:
    'car' would name 'caring' and 'train' 'training'; verb forms are listed as synonyms where a set needs them."""
    if not word.isascii() or not word.isalpha() or len(word) < 3:
        return set()
    forms = {word + "s", word + "es"}
    if word.endswith("y"):
        forms.add(word[:-1] + "ies")
    return forms


@lru_cache(maxsize=1)
def shipped_sets() -> dict[str, dict[str, tuple[str, ...]]]:
    """The shipped label sets: set name → concept name → its words."""
    raw = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    return {name: {str(c): tuple(str(w) for w in words) for c, words in concepts.items()} for name, concepts in raw.items()}


_MARKS = frozenset(",.;:!?，。；：！？")


def _key(text: str) -> tuple[str, ...]:
    """A text as the tokens a word is matched by (sentence marks left out)."""
    return tuple(t for t in tokens(text) if t not in _MARKS)


def own_words(label: str) -> set[tuple[str, ...]]:
    """A label's own words: the label, each part of 'cafe/restaurant', and the label run together."""
    parts = [label] + [p for p in re.split(r"\s*[/|,;]\s*", label) if p.strip()]
    words = {_key(p) for p in parts}
    words |= {("".join(w),) for w in list(words) if len(w) > 1 and all(x.isascii() for x in w)}
    words |= {tuple(re.split(r"[_\-]", w[0])) for w in list(words) if len(w) == 1 and re.search(r"[_\-]", w[0])}
    return {w for w in words if w}


def _concept_words(words: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The words of every shipped concept that one of `words` names."""
    found: set[tuple[str, ...]] = set()
    for concepts in shipped_sets().values():
        for terms in concepts.values():
            keys = {_key(t) for t in terms}
            if keys & words:
                found |= keys
    return found


@dataclass(frozen=True)
class LabelSet:
    """A fixed set of labels and the words that name each: word (as tokens) → the label's index."""

    labels: tuple[str, ...]
    words: Mapping[tuple[str, ...], int]
    longest: int

    @classmethod
    def of(cls, labels: Iterable[str], extra: Optional[Mapping[str, list[str]]] = None) -> "LabelSet":
        """The label set of `labels`, with the shipped synonyms and `extra` ({label: [word, ...]})."""
        labels = tuple(labels)
        own = [own_words(label) for label in labels]
        claims: dict[tuple[str, ...], set[int]] = {}
        for index, label in enumerate(labels):
            named = own[index] | _concept_words(own[index]) | {_key(w) for w in (extra or {}).get(label, [])}
            named |= {(f,) for w in list(named) if len(w) == 1 for f in _inflections(w[0])}
            for word in named:
                claims.setdefault(word, set()).add(index)
        words = {}
        for word, owners in claims.items():
            mine = {i for i in owners if word in own[i]}
            if len(mine or owners) == 1:
                words[word] = next(iter(mine or owners))
        return cls(labels, words, max((len(w) for w in words), default=1))


@dataclass(frozen=True)
class LabelReading:
    """The label a reply names (None: unreadable), the labels it named, and the rules that read it."""

    label: Optional[str]
    named: tuple[str, ...]
    rules: tuple[str, ...]


def _negated(toks: list[str], at: int) -> bool:
    """Whether a negation stands within NEGATION_REACH tokens before position `at`, with no break between."""
    for back in range(1, NEGATION_REACH + 1):
        i = at - back
        if i < 0 or toks[i] in _BREAKS:
            return False
        if toks[i] in _NEGATORS or (i > 0 and (toks[i - 1], toks[i]) in _NEGATING_PAIRS):
            return True
        if toks[i] in _NEGATORS_ZH or (i > 0 and toks[i - 1] + toks[i] in _NEGATORS_ZH):
            return True
    return False


def _asked(toks: list[str]) -> list[bool]:
    """Per token, whether a label there is asked about, not stated: its sentence ends with a question mark, or its
    clause opens with 'whether' / 'if' / 是否 ("It is not possible to tell whether the speaker is male"). One pass
    each way, so a long reply costs no more than its length."""
    asking, in_clause = [], False
    for i, tok in enumerate(toks):
        in_clause = False if tok in _CLAUSE_ENDS else in_clause or tok in _ASKING or (i > 0 and toks[i - 1] + tok == "是否")
        asking.append(in_clause)
    question, end = [False] * len(toks), False
    for i in range(len(toks) - 1, -1, -1):
        end = toks[i] in ("?", "？") if toks[i] in _SENTENCE_ENDS else end
        question[i] = end
    return [a or q for a, q in zip(asking, question)]


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    index: int
    synonym: bool


_LIST_JOINS = frozenset({",", "，", "、", ";", "；", "or", "and", "或", "和", "与", "與"})
ECHO = 3  # labels listed one after another, this many or more, are the set read back, not an answer


def _mentions(toks: list[str], label_set: LabelSet) -> tuple[list[_Mention], bool]:
    """Every label the tokens name, longest words first, and whether a negated one was passed over."""
    found, negation, i = [], False, 0
    asked = _asked(toks)
    while i < len(toks):
        for size in range(min(label_set.longest, len(toks) - i), 0, -1):
            index = label_set.words.get(tuple(toks[i: i + size]))
            if index is not None:
                break
        else:
            i += 1
            continue
        if _negated(toks, i) or asked[i]:
            negation = True
        else:
            found.append(_Mention(i, i + size, index, tuple(toks[i: i + size]) not in own_words(label_set.labels[index])))
        i += size
    return found, negation


def _without_echoes(toks: list[str], found: list[_Mention]) -> tuple[list[_Mention], bool]:
    """The mentions outside lists of ECHO or more labels ('neutral, joy, sadness or anger'): such a list
    reads the set back (an option list, a hedge), and says nothing of the answer."""
    kept, run = [], [found[0]] if found else []
    runs = []
    for previous, mention in zip(found, found[1:]):
        if all(t in _LIST_JOINS for t in toks[previous.end: mention.start]):
            run.append(mention)
        else:
            runs.append(run)
            run = [mention]
    runs.append(run)
    for run in runs:
        if len({m.index for m in run}) < ECHO:
            kept += run
    return kept, len(kept) < len(found)


def read_label(reply: str, label_set: LabelSet) -> LabelReading:
    """The one label of `label_set` the reply names, or None when it names none or several."""
    toks = tokens(reply)
    found, negation = _mentions(toks, label_set)
    found, echo = _without_echoes(toks, found)
    rules = {"negation"} if negation else set()
    rules |= {"echo"} if echo else set()
    rules |= {"synonym"} if any(m.synonym for m in found) else set()
    distinct = tuple(dict.fromkeys(label_set.labels[m.index] for m in found))
    if len(distinct) != 1:
        return LabelReading(None, distinct, tuple(sorted(rules | {"unreadable"})))
    whole = _key(reply) in own_words(distinct[0])
    return LabelReading(distinct[0], distinct, tuple(sorted(rules | (set() if whole else {"label_in_reply"}))))


def reference_sets(reference: str, extra: Optional[Mapping[str, list[str]]] = None) -> Optional[LabelSet]:
    """For a plain label reference: the reference itself, with the words of the concepts it names, beside the
    other labels of every shipped set holding it (and `extra`'s labels); None when no set holds it."""
    words = own_words(reference)
    labels = [reference]
    for concepts in shipped_sets().values():
        named = [c for c, terms in concepts.items() if {_key(t) for t in terms} & words]
        if named:  # 'cafe/restaurant' stands for the set's cafe and restaurant: it is one label here
            labels += [c for c in concepts if c not in named and c not in labels]
    extra_labels = [x for x in (extra or {}) if not own_words(x) & words and x not in labels]
    held = len(labels) > 1 or len(extra_labels) < len(extra or {})  # a shipped set, or the runspec's, holds it
    if not held or len(labels) + len(extra_labels) < 2:  # a set of one label would read any mention of it as right
        return None
    return LabelSet.of(labels + extra_labels, extra)


def reference_label(reference: str, label_set: LabelSet) -> Optional[str]:
    """The label of `label_set` a plain reference names (itself read as a one-label reply)."""
    return read_label(reference, label_set).label
