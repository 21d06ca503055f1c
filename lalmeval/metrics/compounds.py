"""Word alignment that lets split compounds match joined ones at no cost (the Open ASR Leaderboard's).

kaldialign's `edit_distance(ref, hyp, merge_compounds=True)` (github.com/pzelasko/kaldialign,
`kaldi_align.cpp` LevenshteinEditDistanceCompound), which the leaderboard's scorer calls through
`batch_error_rate`: the Levenshtein table with unit costs, plus two free moves — k ≥ 2 adjacent
reference words whose concatenation is one hypothesis word ("white paper" ↔ "whitepaper"), and
the reverse. Each cell copies the counts of the cell it came from: a match or substitution if
strictly cheaper than both a deletion and an insertion, else a deletion if strictly cheaper than an
insertion, else an insertion; then a compound move (k = 2, 3, … in turn) if strictly cheaper
still. The counts (and so S/D/I) follow these ties exactly; their sum is the minimal cost.

Since every choice depends only on the costs around a cell, the costs are computed a row at a
time in numpy (the insertion chain as a running minimum), compound moves only where a word ends
with its neighbour, and the counts by walking the choices back from the last cell — so a
5,000-word call takes a second and memory for one byte per cell.
"""

from __future__ import annotations

import numpy as np

SUB, DEL, INS, MERGE = 0, 1, 2, 3


def _proper_suffixes(words: list[str]) -> dict[str, list[int]]:
    """Every proper suffix of every word → the (1-based) positions of the words it ends."""
    found: dict[str, list[int]] = {}
    for position, word in enumerate(words, 1):
        for start in range(1, len(word)):
            found.setdefault(word[start:], []).append(position)
    return found


def _merged_length(words: list[str], end: int, target: str) -> list[int]:
    """k ≥ 2 such that words[end-k:end] joined equal `target`, in increasing k."""
    found, merged = [], words[end - 1]
    for k in range(2, end + 1):
        merged = words[end - k] + merged
        if len(merged) > len(target):
            break
        if merged == target:
            found.append(k)
    return found


class _Table:
    """The cost table, one row at a time, with the move each cell chose."""

    def __init__(self, reference: list[str], hypothesis: list[str]):
        self.ref, self.hyp = reference, hypothesis
        vocab: dict[str, int] = {}
        self.ref_ids = np.array([vocab.setdefault(w, len(vocab)) for w in reference], dtype=np.int64)
        self.hyp_ids = np.array([vocab.setdefault(w, len(vocab)) for w in hypothesis], dtype=np.int64)
        # A compound move reaches back at most as many rows as the longest hypothesis word has characters.
        self.reach = max((len(w) for w in hypothesis), default=0) + 1
        self.rows: dict[int, np.ndarray] = {0: np.arange(len(hypothesis) + 1)}
        self.moves = np.full((len(reference) + 1, len(hypothesis) + 1), INS, dtype=np.int8)
        self.moves[1:, 0] = DEL
        self.merged: dict[tuple[int, int], tuple[int, int]] = {}  # cell → the cell its compound move came from
        self.hyp_suffixes = _proper_suffixes(hypothesis)
        self.hyp_at: dict[str, list[int]] = {}
        for position, word in enumerate(hypothesis, 1):
            self.hyp_at.setdefault(word, []).append(position)

    def row(self, i: int) -> None:
        """Row i: standard moves vectorized, compound moves at the cells where they can apply."""
        above = self.rows[i - 1]
        cols = np.arange(len(self.hyp) + 1)
        substitution = above[:-1] + (self.hyp_ids != self.ref_ids[i - 1])
        deletion = above[1:] + 1
        best = np.concatenate(([i], np.minimum(substitution, deletion)))
        row = np.minimum.accumulate(best - cols) + cols  # insertions come from the left, in the same row
        word = self.ref[i - 1]
        candidates = sorted({*self.hyp_suffixes.get(word, ()),
                             *(j for start in range(1, len(word)) for j in self.hyp_at.get(word[start:], ()))})
        for j in candidates:
            cost = self._compound(i, j, row)
            if cost < row[j]:
                row[j] = cost
                row[j:] = np.minimum(row[j:], cost + cols[:len(row) - j])  # cheaper insertions to its right
        self.rows[i] = row
        self.rows.pop(i - self.reach, None)
        self._choose(i, row, substitution, deletion)
        for j in candidates:
            if (i, j) in self.merged:
                self.moves[i, j] = MERGE

    def _compound(self, i: int, j: int, row: np.ndarray) -> int:
        """The cheapest compound move into (i, j), recorded in self.merged, as the standard cost stands."""
        standard = min(self.rows[i - 1][j - 1] + int(self.ref[i - 1] != self.hyp[j - 1]), self.rows[i - 1][j] + 1, row[j - 1] + 1)
        cost = standard
        for k in _merged_length(self.ref, i, self.hyp[j - 1]):
            if self.rows[i - k][j - 1] < cost:
                cost, self.merged[(i, j)] = int(self.rows[i - k][j - 1]), (i - k, j - 1)
        for k in _merged_length(self.hyp, j, self.ref[i - 1]):
            if self.rows[i - 1][j - k] < cost:
                cost, self.merged[(i, j)] = int(self.rows[i - 1][j - k]), (i - 1, j - k)
        return cost

    def _choose(self, i: int, row: np.ndarray, substitution: np.ndarray, deletion: np.ndarray) -> None:
        insertion = row[:-1] + 1
        self.moves[i, 1:] = np.where((substitution < insertion) & (substitution < deletion), SUB,
                                     np.where(deletion < insertion, DEL, INS))


def compound_edit_counts(reference: list[str], hypothesis: list[str]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) of the compound-merging alignment."""
    table = _Table(reference, hypothesis)
    for i in range(1, len(reference) + 1):
        table.row(i)
    substitutions = deletions = insertions = 0
    i, j = len(reference), len(hypothesis)
    while i > 0 or j > 0:
        move = table.moves[i, j]
        if move == MERGE:
            i, j = table.merged[(i, j)]
        elif move == SUB:
            substitutions += int(reference[i - 1] != hypothesis[j - 1])
            i, j = i - 1, j - 1
        elif move == DEL:
            deletions, i = deletions + 1, i - 1
        else:
            insertions, j = insertions + 1, j - 1
    return substitutions, deletions, insertions
