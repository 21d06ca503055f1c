"""CHAT (TalkBank .cha) transcripts: timed utterances, and the words a listener hears in each.

Parsing. `pylangacq` splits a file into main-tier utterances (`*A:` lines, their tab-indented
continuation lines joined, `%` dependent tiers and `@` headers set apart) and hands back each
main tier exactly as written. Times come from the tier's time bullets (`\\x15start_end\\x15`,
milliseconds; also the older `\\x15%snd:"name"_start_end\\x15`): the utterance runs from the
first bullet's start to the last bullet's end. We read the bullets ourselves because pylangacq
reports only the first one. An utterance without a bullet has no audio to cut, so it is skipped
and counted (`Transcript.untimed`).

Cleaning. The reference keeps what a listener hears as words, in the order they were said, and
drops what CHAT adds about them:

- Retracings and repetitions are spoken, so their words stay: `I want [/] I want` →
  `I want I want`, `<I thought> [//] I think` → `I thought I think`. Only the code goes.
- `[x N]` means the word or `<scope>` before it was said N times: it is written out N times.
- Every other bracketed code goes with its content: `[: going to]` (what was meant: the
  spoken `gonna` stays), `[=! laughs]`, `[= …]`, `[% comment]`, `[*]`, `[?]`, `[!]`, `[<]`,
  `[>]`, `[+ …]`, `[- spa]`, `[^ …]`. The angle brackets of a `<scope>` go; its words stay.
- `&`-codes are not words: `&=laughs` (events), `&-uh` (fillers), `&+fr` (fragments),
  `&~`, `&*B:mhm` (the other speaker's interjection) and `&{l=…`/`&}l=…` (their words stay).
  Fillers and fragments are marked with `&` precisely so that word counts leave them out, and
  speech recognizers are not expected to write them.
- `xxx`, `yyy`, `www` (unintelligible, phonetic-only, untranscribed) go: no reference exists.
- `0word` (a word that was not said) goes.
- `word@s`, `a@l`, `hm@o`: the special form marker (`@` and what follows) goes; the word stays.
- Incomplete words are written in full: `(be)cause` → `because`, `runnin(g)` → `running`.
- Compounds and names: `ice+cream` → `ice cream`, `New_York` → `New York`.
- Terminators, linkers and precodes (`.`, `?`, `!`, `+...`, `+/.`, `+//.`, `+"/.`, `+"`,
  `+^`, `+<`, `++`, `+,`, `+≈`), commas, `„` (tag) and `‡` (vocative) go.
- Pauses go: `(.)`, `(..)`, `(...)`, `(1.5)`, `(2.)`, `(1:02.5)`.
- Conversation-analysis marks go, leaving the word whole: lengthening `so::` → `so`, pitch
  `↑↓`, latching `≈≋`, overlap `⌈⌉⌊⌋` (with their index digits, `⌈2`), tempo and voice
  `∆∇°▁▔☺♋⁎∬∲§∾↻Ϋ`, intonation `⇗↗→↘⇘∞≡`, glottal stop and stress `ʔʕˈˌː`, blocking `^`, group
  `‹›`, quotes `“”`, and laughter inside a word (`wo↫hh↫rd` → `word`). In general every
  character that is not a letter, combining mark, digit, apostrophe or inner hyphen goes.

Case is kept; a word-error-rate normalizer decides about case and numbers.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Optional

from lalmeval.errors import UserError

_BULLET = re.compile(r"\x15[^\x15]*?(\d+)_(\d+)\x15")
_ANY_BULLET = re.compile(r"\x15[^\x15]*\x15")
# `+<` is one precode; without its own alternative the `<` would open a scope.
_TOKEN = re.compile(r"\+<|\[[^\]]*\]|<|>|[^\s<>\[\]]+")
_REPEAT = re.compile(r"\[x\s*(\d+)\s*\]")
_PAUSE = re.compile(r"\((?:\.{1,3}|\d+(?::\d+)?\.\d*)\)")
_MARKER = re.compile(r"@\S*$")
_IN_WORD_LAUGH = re.compile(r"↫[^↫]*↫")
_OVERLAP = re.compile(r"[⌈⌉⌊⌋]\d*")
# Letters by Unicode category that CHAT uses as annotation, not spelling.
_LETTER_LIKE_MARKS = set("ʔʕˈˌːΫἩ")
_UNSAID = {"xxx", "yyy", "www"}


class Utterance(NamedTuple):
    """One timed main-tier utterance."""

    speaker: str
    raw: str
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Transcript:
    """A CHAT file's timed utterances in file order, and how many were skipped for lack of a bullet."""

    path: Path
    utterances: list[Utterance]
    untimed: int = 0
    languages: list[str] = field(default_factory=list)


def span_of(raw: str) -> Optional[tuple[float, float]]:
    """(start, end) in seconds from the time bullets of a main tier; None without a valid bullet."""
    marks = [(int(a), int(b)) for a, b in _BULLET.findall(raw)]
    if not marks:
        return None
    start, end = min(a for a, _ in marks), max(b for _, b in marks)
    return (start / 1000.0, end / 1000.0) if end > start else None


def _spoken_tokens(raw: str) -> list[str]:
    """Main-tier tokens in spoken order: scope brackets gone, `[x N]` written out, other codes dropped."""
    levels: list[list[list[str]]] = [[]]  # one list of nodes per open <scope>; a node is a run of tokens
    for token in _TOKEN.findall(_ANY_BULLET.sub(" ", raw)):
        if token == "<":
            levels.append([])
        elif token == ">" and len(levels) > 1:
            scope = levels.pop()
            levels[-1].append([t for node in scope for t in node])
        elif token.startswith("["):
            repeat = _REPEAT.fullmatch(token)
            if repeat and levels[-1]:
                levels[-1][-1] = levels[-1][-1] * int(repeat.group(1))
        elif token != ">":
            levels[-1].append([token])
    return [t for level in levels for node in level for t in node]


def _keep(ch: str) -> bool:
    if ch in _LETTER_LIKE_MARKS:
        return False
    return ch.isspace() or ch in "'’-" or unicodedata.category(ch)[0] in "LMN"


def clean_word(token: str) -> list[str]:
    """The word(s) a listener hears in one CHAT token; [] for codes, pauses and unsaid words."""
    if token.startswith(("&", "+", "0")) or _PAUSE.fullmatch(token):
        return []
    word = _MARKER.sub("", token)
    word = _OVERLAP.sub("", _IN_WORD_LAUGH.sub("", word))
    word = "".join(ch for ch in word.replace("+", " ").replace("_", " ") if _keep(ch))
    words = [w.strip("-") for w in word.split()]
    return [w for w in words if w and w.lower() not in _UNSAID]


def clean_text(raw: str) -> str:
    """The words a listener hears in a CHAT main tier, by the rules in this module's docstring."""
    return " ".join(w for token in _spoken_tokens(raw) for w in clean_word(token))


def parse_chat(text: str, path: Path) -> Transcript:
    """Parse CHAT text (read from `path`, named in errors) into timed, cleaned utterances."""
    try:
        import pylangacq
    except ImportError:
        from lalmeval.catalog.bundled import install

        raise UserError(f"{path}: reading CallHome's CHAT transcripts needs the pylangacq package: {install('callhome')}") from None

    try:
        # strict=False and no %mor/%gra: we need neither the morphology tiers nor the check
        # that @Media names the file, and a renamed transcript is still a valid one.
        chat = pylangacq.CHAT.from_strs([text], ids=[path.name], parallel=False, strict=False, mor_tier=None, gra_tier=None)
    except (ValueError, OSError) as exc:
        raise UserError(f"{path}: not a readable CHAT transcript: {str(exc).splitlines()[0]}") from None
    tiers = [u for u in chat.utterances() if u.participant and u.annotated is not None]
    if not tiers:
        raise UserError(f"{path}: no utterances ('*A:' lines) found: not a CHAT transcript?")
    utterances, untimed = [], 0
    for tier in tiers:
        span = span_of(tier.annotated)
        if span is None:
            untimed += 1
            continue
        utterances.append(Utterance(tier.participant, tier.annotated, clean_text(tier.annotated), *span))
    languages = [lang for header in chat.headers() for lang in (header.languages or [])]
    return Transcript(path, utterances, untimed, languages)


def read_chat(path: Path) -> Transcript:
    """Read a UTF-8 .cha file; undecodable bytes are a one-line UserError naming the file."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); CHAT transcripts are UTF-8"
        ) from None
    return parse_chat(text, path)
