"""The cheapest one-to-one assignment of rows to columns (speakers to speakers), ties broken as SciPy breaks them.

The shortest augmenting path method of Crouse ("On implementing 2D rectangular assignment
algorithms", IEEE TAES 2016), in the order SciPy's `linear_sum_assignment` visits rows and
columns, so that among assignments of equal cost the same one is chosen (cpWER's per-kind counts
follow MeetEval's, which uses SciPy's). Matrices here are a few speakers wide: plain Python suffices.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def linear_sum_assignment(cost: Sequence[Sequence[float]] | np.ndarray, maximize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the assignment with the least (or, `maximize`, the greatest) total cost."""
    matrix = np.asarray(cost, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"expected a matrix, got {matrix.ndim} dimension(s)")
    if matrix.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if np.isnan(matrix).any() or (np.isneginf(matrix) if not maximize else np.isposinf(matrix)).any():
        raise ValueError("the cost matrix holds NaN or an infinity that would make every assignment best")
    if maximize:
        matrix = -matrix
    transpose = matrix.shape[1] < matrix.shape[0]
    if transpose:
        matrix = matrix.T
    col4row = _assign(matrix.tolist())
    if transpose:
        order = sorted(range(len(col4row)), key=lambda r: col4row[r])
        return np.array([col4row[r] for r in order], dtype=np.int64), np.array(order, dtype=np.int64)
    return np.arange(len(col4row), dtype=np.int64), np.array(col4row, dtype=np.int64)


def _assign(cost: list[list[float]]) -> list[int]:
    """The column of each row (rows <= columns), one augmenting path per row."""
    rows, cols = len(cost), len(cost[0])
    u, v = [0.0] * rows, [0.0] * cols
    col4row, row4col = [-1] * rows, [-1] * cols
    for current in range(rows):
        sink, lowest, path, shortest, seen_rows, seen_cols = _augmenting_path(cost, u, v, row4col, current)
        u[current] += lowest
        for i in range(rows):
            if seen_rows[i] and i != current:
                u[i] += lowest - shortest[col4row[i]]
        for j in range(cols):
            if seen_cols[j]:
                v[j] -= lowest - shortest[j]
        j = sink
        while True:  # flip the path's edges: each row on it takes the column it reached
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == current:
                break
    return col4row


def _augmenting_path(cost: list[list[float]], u: list[float], v: list[float], row4col: list[int], start: int):
    """Dijkstra over reduced costs from row `start` to the nearest free column (its sink)."""
    cols = len(v)
    remaining = [cols - k - 1 for k in range(cols)]
    shortest, path = [math.inf] * cols, [-1] * cols
    seen_rows, seen_cols = [False] * len(u), [False] * cols
    lowest, i, sink = 0.0, start, -1
    while sink == -1:
        seen_rows[i] = True
        best, index = math.inf, -1
        for k, j in enumerate(remaining):
            reduced = lowest + cost[i][j] - u[i] - v[j]
            if reduced < shortest[j]:
                path[j], shortest[j] = i, reduced
            # Among equal distances a free column wins: it ends the path (SciPy's tie rule).
            if shortest[j] < best or (shortest[j] == best and row4col[j] == -1):
                best, index = shortest[j], k
        if best == math.inf:
            raise ValueError("the cost matrix is infeasible: every assignment costs infinity")
        lowest = best
        j = remaining[index]
        seen_cols[j] = True
        if row4col[j] == -1:
            sink = j
        else:
            i = row4col[j]
        remaining[index] = remaining[-1]
        remaining.pop()
    return sink, lowest, path, shortest, seen_rows, seen_cols
