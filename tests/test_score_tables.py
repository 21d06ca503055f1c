"""The console and HTML score tables keep header and rows in step in every combination of their optional columns
(Not run, Judge failed, Cached, Replicas, lalmeval's own, 95% CI, TTFT/TTFA), as the merged branches add them."""

import io
import itertools
from pathlib import Path

import pytest

from lalmeval.reports.html import score_rows
from lalmeval.reports.rundir import RunDir
from lalmeval.reports.scores import score_table
from lalmeval.results.ledger import NOT_RUN
from lalmeval.results.records import Score

OPTIONAL = {
    "stopped": {"failures": {NOT_RUN: 2}},
    "judged": {"num_judge_failed": 1},
    "cached": {"from_cache": {"answers": 3}},
    "pooled": {"replicas": ["a", "b"]},
    "two": {"lalmeval": {"score": 12.0, "score_is": "as AU-Harness prints it", "differs_by": "reading: x"}},
    "timed": {"latency": {"ttft": {"p50": 0.1, "p90": 0.2, "p99": 0.3}, "ttfa": {"p50": 0.2, "p90": 0.3, "p99": 0.4}}},
    "subset": {"subsets": {"female": {"score": 1.0, "num_samples": 2, "num_failed": 0, "ci95": [0.0, 1.0]}}},
}
HEADERS = {"stopped": "Not run", "judged": "Judge failed", "cached": "Cached", "pooled": "Replicas", "two": "lalmeval's own",
           "timed": "TTFT p50/p90/p99 s"}


def scores_with(names: tuple[str, ...]) -> list[Score]:
    details = {k: v for name in names for k, v in OPTIONAL[name].items()}
    # The second score has none of them: its cells must still line up under every column.
    return [Score("m", "ds", "word_error_rate", 10.0, 5, 2, details, (1.0, 2.0), 0.5), Score("m2", "ds", "word_error_rate", 11.0, 5, 0, {})]


@pytest.mark.parametrize("names", [c for n in range(len(OPTIONAL) + 1) for c in itertools.combinations(OPTIONAL, n)], ids=str)
def test_every_row_of_both_score_tables_has_one_cell_per_header(names):
    scores = scores_with(names)
    text = score_table(scores, [], stream=io.StringIO())
    header = text.splitlines()[1]
    assert [n for n in HEADERS if HEADERS[n] in header] == [n for n in HEADERS if n in names], header
    lines = [line for line in text.splitlines() if line.startswith("│")]
    assert len(lines) == 3 and len({line.count("│") for line in lines}) == 1, text
    head, rows, _ = score_rows(RunDir(Path("unused"), {"scores": [s.to_json() for s in scores]}))
    assert all(len(row) == len(head) for row in rows), (head, rows)
    assert ("lalmeval's own" in head) == ("two" in names) and ("Not run" in head) == ("stopped" in names)
