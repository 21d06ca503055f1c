"""speaker_diarization: speaker-attributed transcripts scored by cpWER, WDER and speaker-count error.

Reference and prediction are transcripts with one `SPEAKER: words` line per turn. Labels may be
written `A:`, `Speaker A:`, `SPEAKER_01:`, `**A:**`, `**A**:`, `[A]`, `A：` (full-width colon),
after a list bullet; a line without a label continues the previous speaker, blank lines are
ignored, and text before the first label belongs to a speaker of its own (`?`). Label names
only have to be consistent within one transcript: every measure below maps hypothesis speakers
to reference speakers itself.

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

from lalmeval.metrics.base import METRICS, SampleScore, empty_reference, sample_stats, unscored
from lalmeval.metrics.wer import UnitMetric
from lalmeval.metrics.cpwer import CpErrors, cp_word_errors
from lalmeval.records import Record
from lalmeval.stats import SampleStats, ratio

Tokens = Callable[[str], list[str]]

UNLABELED = "?"
_NAME = r"(?:(?:speaker|spkr|spk)[\s_-]*)?(?:\d{1,2}|[a-z]\d{0,2})"
_BOLD = r"(?:\*\*|__)?"
_LABEL = re.compile(
    # (?!\d): "10:30 we met" is a time, not speaker 10.
    rf"^(?:[-*•]\s+)?{_BOLD}(?:\[\s*(?P<bracketed>{_NAME})\s*\]{_BOLD}\s*[:：]?|(?P<plain>{_NAME}){_BOLD}\s*[:：](?!\d)){_BOLD}\s*",
    re.IGNORECASE,
)
_PREFIX = re.compile(r"^(?:speaker|spkr|spk)[\s_-]*", re.IGNORECASE)
INS, DEL, DIAG = 1, 2, 0


def _speaker_id(name: str) -> str:
    core = _PREFIX.sub("", name.strip()).upper()
    return str(int(core)) if core.isdigit() else core  # SPEAKER_01 and Speaker 1 are one speaker


def parse_speakers(text: str) -> list[tuple[str, str]]:
    """(speaker, text) per labelled line of a transcript; unlabelled lines continue the last speaker."""
    segments: list[tuple[str, str]] = []
    speaker = UNLABELED
    for line in text.splitlines():
        line = line.strip()
        match = _LABEL.match(line)
        if match:
            speaker = _speaker_id(match.group("bracketed") or match.group("plain"))
            line = line[match.end():]
        if line:
            segments.append((speaker, line))
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
    from scipy.optimize import linear_sum_assignment

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
