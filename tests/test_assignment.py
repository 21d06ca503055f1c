"""lalmeval's own assignment and t quantile give SciPy's answers (SciPy is the reference, installed for the tests only)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lalmeval.metrics.assignment import linear_sum_assignment
from lalmeval.stats import student_t_quantile

scipy_optimize = pytest.importorskip("scipy.optimize", reason="requirements-test.txt installs SciPy, the reference")
scipy_stats = pytest.importorskip("scipy.stats")


def _matrices(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        rows, cols = rng.randint(1, 7), rng.randint(1, 7)
        top = rng.choice([1, 2, 3, 10, 1000])  # small ranges make many ties, where the tie rule shows
        yield np.array([[rng.randint(0, top) for _ in range(cols)] for _ in range(rows)], dtype=np.int64)


@pytest.mark.parametrize("maximize", [False, True])
def test_assignment_is_scipys_own_on_square_and_rectangular_matrices_with_ties(maximize):
    for cost in _matrices(seed=7 + maximize, count=3000):
        ours = linear_sum_assignment(cost, maximize=maximize)
        theirs = scipy_optimize.linear_sum_assignment(cost, maximize=maximize)
        assert [list(a) for a in ours] == [list(b) for b in theirs], cost


def test_assignment_finds_the_cheapest_pairing_of_a_known_matrix():
    cost = [[4, 1, 3], [2, 0, 5], [3, 2, 2]]
    rows, cols = linear_sum_assignment(cost)
    assert list(zip(rows, cols)) == [(0, 1), (1, 0), (2, 2)]
    assert sum(cost[r][c] for r, c in zip(rows, cols)) == 5


def test_assignment_of_an_empty_matrix_is_empty_and_nan_is_refused():
    rows, cols = linear_sum_assignment(np.zeros((0, 3)))
    assert len(rows) == len(cols) == 0
    with pytest.raises(ValueError, match="NaN"):
        linear_sum_assignment([[1.0, float("nan")]])


@pytest.mark.parametrize("p", [0.6, 0.9, 0.95, 0.975, 0.995, 0.999])
def test_t_quantile_is_scipys_to_eight_digits(p):
    for df in list(range(1, 400)) + [1000, 10_000, 100_000, 1_000_000]:
        assert student_t_quantile(p, df) == pytest.approx(float(scipy_stats.t.ppf(p, df)), rel=1e-8), df


def test_t_quantile_of_one_degree_of_freedom_is_the_cauchy_quantile():
    assert student_t_quantile(0.975, 1) == pytest.approx(np.tan(np.pi * 0.475), rel=1e-12)


def test_t_quantile_refuses_what_has_no_quantile():
    with pytest.raises(ValueError):
        student_t_quantile(0.975, 0)
    with pytest.raises(ValueError):
        student_t_quantile(0.4, 5)
