"""speaker_diarization: speaker-attributed transcripts scored by cpWER, WDER and speaker-count error.

Reference and prediction are transcripts with one `SPEAKER: words` line per turn. A label is any
short name before a colon: letters (`A:`), numbers (`1:`, `SPEAKER_00:`, `Speaker 1:`), roles and
names of up to three words (`Caller:`, `Agent:`, `Customer Service:`, `Dr. Smith:`), written
plain, `**A:**`, `**A**:`, `[A]`, `A：` (full-width colon) or after a list bullet; a colon before a
digit or `//` is no label (`10:30`, `http://`). A line without a label continues the previous
speaker, blank lines are ignored, and text before the first label belongs to a speaker of its own
(`?`). A model often writes a whole conversation on one line: a label also starts a new turn
inside a line when the transcript uses that name at the start of a line, when it is a `Speaker X`
/ `SPEAKER_00` form, or when a capitalised name of up to three words follows the end of a
sentence (`… thanks. Agent: …`). A label is never scored as a word. Label names only have to be
consistent within one transcript (`Speaker 1`, `SPEAKER_01`, `spk1` and `1` are one speaker;
case does not matter): every measure below maps hypothesis speakers to reference speakers itself,
by the assignment that is best for it, whatever the names.

Words are normalized and split exactly as `word_error_rate` counts them for the same dataset (its
normalizer and error unit, see `metrics/wer.py` `Units`), line by line, so a one-speaker window
scores its WER. Speakers without a word after normalization do not count.

- **cpWER** (concatenated minimum-permutation WER; Watanabe et al., "CHiME-6 Challenge",
  arXiv:2004.09249): each speaker's words are concatenated, hypothesis speakers are assigned to
  reference speakers so that the total word errors are minimal, and errors / reference words.
  Counted as `meeteval.wer.cp_word_error_rate` counts it (metrics/cpwer.py; von Neumann et al., "MeetEval",
  arXiv:2307.11394). The score is the corpus value in percent: Σ errors / Σ reference words
  over windows, as `meeteval.wer.combine_error_rates` combines them. A window whose reference has
  no word after normalization is not scored (lalmeval's rule for every metric: it fails with
  `empty reference after normalization`). `details.cpwer` is the same as a fraction.
- **WDER** (word diarization error rate; Shafey et al., arXiv:1907.05337, as implemented by
  DiarizationLM, Wang et al., arXiv:2401.03506, `diarizationlm/metrics.py` in
  github.com/google/speaker-id): the word sequences are aligned ignoring speakers (Levenshtein,
  ties broken as DiarizationLM breaks them: insertion, then deletion, then match or
  substitution); over the aligned pairs (matches and substitutions) the speaker mapping that
  agrees most often is found (Hungarian algorithm), and WDER = pairs whose speakers disagree
  under it / aligned pairs. Corpus value: Σ disagreements / Σ aligned pairs.
- **Speaker-count error**: hypothesis speakers − reference speakers per window (signed, per
  sample); `details.speaker_count_error` is its mean absolute value over windows (DiarizationLM's
  SpkCntMAE).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

import numpy as np

from lalmeval.metrics.assignment import linear_sum_assignment
from lalmeval.metrics.base import METRICS, SampleScore, empty_reference, sample_stats, unscored
from lalmeval.metrics.wer import UnitMetric
from lalmeval.metrics.cpwer import CpErrors, cp_word_errors
from lalmeval.results.records import Record
from lalmeval.stats import SampleStats, ratio

Tokens = Callable[[str], list[str]]

UNLABELED = "?"
_ID = r"(?:(?:speaker|spkr|spk)[\s_-]*)?(?:\d{1,2}|[a-z]\d{0,2})"  # A, B2, 1, Speaker A, SPEAKER_01
_SPEAKER_FORM = r"(?:speaker|spkr|spk)[\s_-]*[a-z0-9]{1,3}"          # unmistakable anywhere in a line
_ROLE = r"[^\W\d_][\w'.()#-]*(?:[ _][\w'.()#-]+){0,2}"            # a name or role of up to three words
_BOLD = r"(?:\*\*|__)?"
_COLON = r"\s*[:：](?!\s*\d|//)"  # 10:30 is a time, http:// an address
_LINE_LABEL = re.compile(
    rf"^(?:[-*•]\s+)?{_BOLD}(?:\[\s*(?P<bracketed>{_ID})\s*\]{_BOLD}\s*[:：]?|(?P<plain>{_ID}|{_ROLE}){_BOLD}{_COLON}){_BOLD}\s*",
    re.IGNORECASE,
)
_SENTENCE_END_LABEL = r"(?<=[.!?。！？…])[\"”’']?\s+{bold}(?P<capital>[A-Z][\w'.-]*(?:\s[A-Z][\w'.-]*){{0,2}}){bold}{colon}"
_PREFIX = re.compile(r"^(?:speaker|spkr|spk)[\s_-]*(?=[a-z0-9]{1,3}$)", re.IGNORECASE)
_MAX_LABEL = 40
INS, DEL, DIAG = 1, 2, 0


def _speaker_id(name: str) -> str:
    """One spelling per speaker: SPEAKER_01, Speaker 1, spk1 and 1 are "1"; Caller and caller are "CALLER"."""
    core = " ".join(_PREFIX.sub("", name.strip()).replace("_", " ").split()).upper()
    return str(int(core)) if core.isdigit() else core


def _line_label(line: str) -> Optional[re.Match[str]]:
    match = _LINE_LABEL.match(line)
    if match and len(match.group("bracketed") or match.group("plain")) <= _MAX_LABEL:
        return match
    return None


def _inline_labels(known: set[str]) -> re.Pattern[str]:
    """Labels inside a line: names the transcript uses at a line start, Speaker X forms, names in bold,
    capitals after the end of a sentence."""
    names = "|".join([*(re.escape(n) for n in sorted(known, key=len, reverse=True)), _SPEAKER_FORM])
    anywhere = rf"(?<![\w*]){_BOLD}(?P<name>{names}){_BOLD}{_COLON}"
    bolded = rf"(?<![\w*])(?:\*\*|__)(?P<bolded>{_ID}|{_ROLE})(?:[:：](?:\*\*|__)|(?:\*\*|__)\s*[:：])(?!\s*\d|//)"
    capital = _SENTENCE_END_LABEL.format(bold=_BOLD, colon=_COLON)
    return re.compile(rf"(?:{anywhere}|{bolded}|{capital}){_BOLD}\s*", re.IGNORECASE)


def _turns_in_line(speaker: str, line: str, inline: re.Pattern[str]) -> list[tuple[str, str]]:
    """(speaker, text) of a line cut at the labels inside it."""
    out, start = [], 0
    for match in inline.finditer(line):
        name = match.group("name") or match.group("bolded") or match.group("capital")
        if match.group("capital") and not re.fullmatch(r"[A-Z][\w'.-]*(?:\s[A-Z][\w'.-]*){0,2}", name):
            continue  # IGNORECASE let a lower-case word through as a "capital"
        out.append((speaker, line[start:match.start()]))
        speaker, start = _speaker_id(name), match.end()
    out.append((speaker, line[start:]))
    return [(s, t.strip()) for s, t in out if t.strip()]


def parse_speakers(text: str) -> list[tuple[str, str]]:
    """(speaker, text) per turn of a transcript; unlabelled lines continue the last speaker."""
    lines, known = [], set()
    for line in text.splitlines():
        line = line.strip()
        match = _line_label(line)
        name = (match.group("bracketed") or match.group("plain")) if match else None
        if name:
            known.add(name)
        lines.append((name, line[match.end():] if match else line))
    inline = _inline_labels(known)
    segments: list[tuple[str, str]] = []
    speaker = UNLABELED
    for name, line in lines:
        if name is not None:
            speaker = _speaker_id(name)
        for speaker, part in _turns_in_line(speaker, line, inline) or [(speaker, "")]:
            if part:
                segments.append((speaker, part))
    return segments


def attributed_words(text: str, units: Tokens) -> tuple[list[str], list[str]]:
    """The transcript's normalized words in order, and the speaker of each."""
    words: list[str] = []
    speakers: list[str] = []
    for speaker, line in parse_speakers(text):
        tokens = units(line)
        words += tokens
        speakers += [speaker] * len(tokens)
    return words, speakers


def _by_speaker(words: list[str], speakers: list[str]) -> dict[str, list[str]]:
    streams: dict[str, list[str]] = {}
    for word, speaker in zip(words, speakers):
        streams.setdefault(speaker, []).append(word)
    return streams


def cpwer(ref: tuple[list[str], list[str]], hyp: tuple[list[str], list[str]]) -> CpErrors:
    """cpWER counts of (words, speakers) reference and hypothesis, as meeteval counts them."""
    # Order is the transcript's own; there are no timestamps to sort by.
    return cp_word_errors(_by_speaker(*ref), _by_speaker(*hyp))


def _moves(ref: list[str], hyp: list[str]) -> np.ndarray:
    """Backpointers of the word Levenshtein table, one row at a time in numpy."""
    vocab: dict[str, int] = {}
    r = np.array([vocab.setdefault(w, len(vocab)) for w in ref], dtype=np.int64)
    h = np.array([vocab.setdefault(w, len(vocab)) for w in hyp], dtype=np.int64)
    cols = np.arange(len(hyp) + 1)
    moves = np.full((len(ref) + 1, len(hyp) + 1), DIAG, dtype=np.int8)
    moves[0, 1:], moves[1:, 0] = INS, DEL
    prev = cols.copy()
    for i in range(1, len(ref) + 1):
        deletion = prev[1:] + 1
        best = np.concatenate(([i], np.minimum(prev[:-1] + (h != r[i - 1]), deletion)))
        # An insertion comes from the left in the same row: row[j] = min_k<=j (best[k] + j - k).
        row = np.minimum.accumulate(best - cols) + cols
        moves[i, 1:] = np.where(row[1:] == row[:-1] + 1, INS, np.where(row[1:] == deletion, DEL, DIAG))
        prev = row
    return moves


def align(ref: list[str], hyp: list[str]) -> list[tuple[int, int]]:
    """Word alignment as (ref index, hyp index) pairs, -1 for a gap; ties broken as DiarizationLM does."""
    moves = _moves(ref, hyp)
    i, j, pairs = len(ref), len(hyp), []
    while i > 0 or j > 0:
        move = moves[i, j]
        if move == INS:
            pairs.append((-1, j - 1))
            j -= 1
        elif move == DEL:
            pairs.append((i - 1, -1))
            i -= 1
        else:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
    return pairs[::-1]


def wder_counts(ref: tuple[list[str], list[str]], hyp: tuple[list[str], list[str]]) -> tuple[int, int]:
    """(aligned words whose speakers disagree under the best speaker mapping, aligned words)."""
    pairs = [(i, j) for i, j in align(ref[0], hyp[0]) if i >= 0 and j >= 0]
    if not pairs:
        return 0, 0
    ref_ids = {s: n for n, s in enumerate(dict.fromkeys(ref[1][i] for i, _ in pairs))}
    hyp_ids = {s: n for n, s in enumerate(dict.fromkeys(hyp[1][j] for _, j in pairs))}
    agree = np.zeros((len(ref_ids), len(hyp_ids)), dtype=np.int64)
    for i, j in pairs:
        agree[ref_ids[ref[1][i]], hyp_ids[hyp[1][j]]] += 1
    rows, cols = linear_sum_assignment(agree, maximize=True)
    return len(pairs) - int(agree[rows, cols].sum()), len(pairs)


def score_window(reference: str, prediction: str, units: Tokens) -> SampleScore:
    """cpWER, WDER and speaker-count error of one window, counting the `units` of each line."""
    ref, hyp = attributed_words(reference, units), attributed_words(prediction, units)
    cp = cpwer(ref, hyp)
    wder_errors, wder_words = wder_counts(ref, hyp)
    return {
        "score": cp.errors / cp.length if cp.length else None,
        "errors": cp.errors, "ref_words": cp.length,
        "substitutions": cp.substitutions, "deletions": cp.deletions, "insertions": cp.insertions,
        "missed_speakers": cp.missed_speaker, "falarm_speakers": cp.falarm_speaker,
        "assignment": [list(pair) for pair in cp.assignment or ()],
        "wder": wder_errors / wder_words if wder_words else None,
        "wder_errors": wder_errors, "wder_words": wder_words,
        "speaker_count_error": len(set(hyp[1])) - len(set(ref[1])),
        "ref_speakers": len(set(ref[1])), "hyp_speakers": len(set(hyp[1])),
    }


def _ratio(num: int, den: int) -> Optional[float]:
    return num / den if den else None


@METRICS.register("speaker_diarization")
class SpeakerDiarization(UnitMetric):
    """Corpus cpWER in percent (as meeteval counts it), with WDER and speaker-count error (DiarizationLM) in details."""

    name = "speaker_diarization"
    lower_is_better = True

    def score_record(self, record: Record) -> SampleScore:
        item = score_window(record.reference or "", record.prediction or "", self.units)
        if (empty := empty_reference(record.reference, item["ref_words"])) is not None:
            return unscored(empty)
        return item

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (x["errors"], x["ref_words"]), ratio(100.0))

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        items = [x for x in items if x["score"] is not None]
        total = {key: sum(x[key] for x in items) for key in (
            "errors", "ref_words", "substitutions", "deletions", "insertions",
            "missed_speakers", "falarm_speakers", "wder_errors", "wder_words")}
        cp = _ratio(total["errors"], total["ref_words"])
        details = {
            "cpwer": cp,
            "wder": _ratio(total["wder_errors"], total["wder_words"]),
            "speaker_count_error": _ratio(sum(abs(x["speaker_count_error"]) for x in items), len(items)),
            **{("reference_words" if k == "ref_words" else k): v for k, v in total.items()},
            "windows": len(items),
            "normalizer": self.units.normalizer_name, "unit": self.units.unit,
        }
        return (100.0 * cp if cp is not None else None), details
