"""Score intervals and paired comparisons: the bootstrap recomputes the corpus statistic, analytic intervals for means."""

import numpy as np
import pytest

from lalmeval.stats import SampleStats, bootstrap, paired_bootstrap, ratio, resampled_sums, t_interval, wilson


def wer_stats(errors, tokens, prefix="s"):
    values = np.array(list(zip(errors, tokens)), dtype=float)
    return SampleStats(tuple(f"{prefix}{i}" for i in range(len(values))), values, ratio(100.0))


def test_bootstrap_recomputes_the_ratio_of_sums_on_each_resample():
    rng = np.random.default_rng(0)
    stats = wer_stats(rng.integers(0, 5, 50), rng.integers(1, 20, 50))
    sums = resampled_sums(stats.values, 300, seed=4)
    # The same resamples drawn one by one: the error rate of the resampled corpus.
    draw = np.random.default_rng(4).integers(0, 50, size=(300, 50))
    slow = [100 * stats.values[d, 0].sum() / stats.values[d, 1].sum() for d in draw]
    assert np.allclose(ratio(100.0)(sums), slow, atol=1e-9)


def test_interval_brackets_the_score_and_repeats_for_a_seed():
    stats = wer_stats([1, 0, 3, 2, 0, 5, 1, 0], [10, 8, 12, 9, 7, 11, 10, 6])
    point = stats.score()
    first = bootstrap(stats, point, 1000, seed=7)
    assert first.ci95[0] < point < first.ci95[1] and first.stderr > 0
    assert bootstrap(stats, point, 1000, seed=7) == first
    assert bootstrap(stats, point, 1000, seed=8).ci95 != first.ci95


def test_zero_resamples_or_no_samples_give_no_interval():
    stats = wer_stats([1, 2], [5, 5])
    assert bootstrap(stats, stats.score(), 0, seed=0).ci95 is None
    empty = SampleStats((), np.zeros((0, 2)), ratio())
    assert bootstrap(empty, 0.0, 100, seed=0).ci95 is None and bootstrap(empty, 0.0, 100, seed=0).stderr is None


def test_wilson_interval_of_a_proportion():
    result = wilson(8, 10)  # 80% correct of 10: the textbook Wilson interval 49.0–94.3%
    assert result.ci95 == pytest.approx((49.016, 94.332), abs=1e-3)
    assert result.stderr == pytest.approx(100 * (0.8 * 0.2 / 10) ** 0.5)
    assert wilson(10, 10).ci95[1] == 100.0 and wilson(10, 10).ci95[0] < 100.0  # all correct is not certainty
    assert wilson(0, 0).ci95 is None


def test_student_t_interval_of_a_mean():
    result = t_interval([1, 2, 3, 4, 5])  # mean 3, s/√n = 0.7071, t(0.975, 4) = 2.7764
    assert result.ci95 == pytest.approx((3 - 2.7764 * 0.70711, 3 + 2.7764 * 0.70711), abs=1e-3)
    assert t_interval([4.0]).ci95 is None


def test_paired_bootstrap_detects_a_consistent_difference():
    rng = np.random.default_rng(1)
    difficulty = rng.integers(0, 8, 200)          # shared per-sample difficulty: the pairing matters
    tokens = np.full(200, 10)
    a = wer_stats(difficulty, tokens, "x")
    b = wer_stats(difficulty + (rng.random(200) < 0.3), tokens, "x")   # b: a few more errors everywhere
    result = paired_bootstrap(a, b, 1000, seed=0)
    assert result["difference"] < 0 and result["ci95"][1] < 0 and result["p_value"] < 0.01
    same = paired_bootstrap(a, a, 1000, seed=0)
    assert same["difference"] == 0 and same["p_value"] == 1.0


def test_paired_bootstrap_uses_only_the_samples_both_scored():
    a = SampleStats(("1", "2", "3"), np.array([[1, 10], [2, 10], [0, 10]], float), ratio(100.0))
    b = SampleStats(("3", "2"), np.array([[5, 10], [2, 10]], float), ratio(100.0))
    result = paired_bootstrap(a, b, 200, seed=0)
    assert result["num_samples"] == 2
    assert result["score_a"] == pytest.approx(10.0) and result["score_b"] == pytest.approx(35.0)
    assert paired_bootstrap(a, SampleStats(("9",), np.array([[1, 1]], float), ratio()), 200, 0) is None
