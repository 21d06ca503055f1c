"""Word alignment that lets split compounds match joined ones at no cost (the Open ASR Leaderboard's).

kaldialign's `edit_distance(ref, hyp, merge_compounds=True)` (github.com/pzelasko/kaldialign,
`kaldi_align.cpp` LevenshteinEditDistanceCompound), which the leaderboard's scorer calls through
`batch_error_rate`: the Levenshtein table with unit costs, plus two free moves — k ≥ 2 adjacent
reference words whose concatenation is one hypothesis word ("white paper" ↔ "whitepaper"), and
the reverse. Each cell keeps the counts of the path that reached it; a cell takes, in this order,
a match or substitution if strictly cheaper than deletion and insertion, else a deletion if
strictly cheaper than an insertion, else an insertion; then a compound move if strictly cheaper
still. The counts (and so S/D/I) follow these ties exactly; their sum is the minimal cost.
"""

from __future__ import annotations

Cell = tuple[int, int, int, int]  # (cost, substitutions, deletions, insertions)


def _standard(diagonal: Cell, above: Cell, left: Cell, same: bool) -> Cell:
    substitution = diagonal[0] + (0 if same else 1)
    deletion, insertion = above[0] + 1, left[0] + 1
    if substitution < insertion and substitution < deletion:
        return diagonal if same else (substitution, diagonal[1] + 1, diagonal[2], diagonal[3])
    if deletion < insertion:
        return (deletion, above[1], above[2] + 1, above[3])
    return (insertion, left[1], left[2], left[3] + 1)


def _joined_suffixes(words: list[str], end: int, target: str) -> list[int]:
    """k ≥ 2 such that words[end-k:end] joined equal `target`."""
    if not target.endswith(words[end - 1]):
        return []
    found, merged = [], words[end - 1]
    for k in range(2, end + 1):
        merged = words[end - k] + merged
        if len(merged) > len(target):
            break
        if merged == target:
            found.append(k)
    return found


def compound_edit_counts(reference: list[str], hypothesis: list[str]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) of the compound-merging alignment."""
    rows, cols = len(reference), len(hypothesis)
    previous: list[list[Cell]] = [[(j, 0, 0, j) for j in range(cols + 1)]]
    for i in range(1, rows + 1):
        row: list[Cell] = [(i, 0, i, 0)]
        for j in range(1, cols + 1):
            cell = _standard(previous[i - 1][j - 1], previous[i - 1][j], row[j - 1], reference[i - 1] == hypothesis[j - 1])
            for k in _joined_suffixes(reference, i, hypothesis[j - 1]):
                if previous[i - k][j - 1][0] < cell[0]:
                    cell = previous[i - k][j - 1]
            for k in _joined_suffixes(hypothesis, j, reference[i - 1]):
                source = previous[i - 1][j - k]
                if source[0] < cell[0]:
                    cell = source
            row.append(cell)
        previous.append(row)
    _, substitutions, deletions, insertions = previous[rows][cols]
    return substitutions, deletions, insertions
