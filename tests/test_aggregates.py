"""Aggregates over datasets: the pooled corpus score beside the sample-weighted and unweighted means, in real runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sacrebleu

from lalmeval.reports.scores import score_table
from lalmeval.stats import SampleStats, pooled, ratio
from tests.support.browser import dump_dom, parse
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model

HUNDRED_WORDS = " ".join(["river", "stone", "light", "paper", "green", "table", "cloud", "music", "horse", "bread"] * 10)


def text_dataset(ws, name: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """A text-modality dataset of (reference, reply) pairs; returns question → reply."""
    rows = [{"id": f"{name}-{i}", "question": f"say {name}-{i}", "reference": ref} for i, (ref, _) in enumerate(pairs)]
    ws.runspec("asr", name, {name: {"hf_repo": ws.jsonl(rows, f"data/{name}.jsonl"), "id_column": "id", "modality": "text",
                                    "textual_input_column": "question", "audio_column": None, "language": "en"}})
    return {f"{name}-{i}": reply for i, (_, reply) in enumerate(pairs)}


def run_aggregate(ws, datasets: dict[str, list[tuple[str, str]]], metrics: list[str], **config):
    replies = {}
    for name, pairs in datasets.items():
        replies.update(text_dataset(ws, name, pairs))
    with ScriptedEndpoint(lambda seen, n: replies[seen.text.split()[-1]]) as ep:
        ws.config([model(ep.url)], [[name, metric] for name in datasets for metric in metrics],
                  aggregate=[[metric, list(datasets)] for metric in metrics], **config)
        result = ws.run()
    return result, json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())


def test_pooled_wer_counts_errors_over_reference_words_of_all_datasets(ws):
    """A 1-word dataset with its word wrong and a 100-word one all right: 1 error in 101 words, not 50 %."""
    result, final = run_aggregate(ws, {"short": [("hello", "goodbye")], "long": [(HUNDRED_WORDS, HUNDRED_WORDS)]},
                                  ["word_error_rate"], bootstrap_resamples=200)
    agg = final["aggregates"][0]
    assert agg["pooled"] == pytest.approx(100 / 101)
    assert agg["weighted_mean"] == pytest.approx(50.0) and agg["unweighted_mean"] == pytest.approx(50.0)
    # Stratified: each dataset keeps its one sample in every resample, so the pooled rate cannot move.
    assert agg["pooled_ci95"] == pytest.approx([100 / 101, 100 / 101])
    assert "within each dataset" in agg["pooled_interval"]
    table = score_table(result.scores, result.aggregates)
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]
    assert cells[-2][4:8] == ["Pooled", "Pooled 95% CI", "Weighted", "Unweighted"] and cells[-1][4:8] == ["0.99", "[0.99, 0.99]", "50.00", "50.00"]
    markdown = (ws.root / "runs" / "t" / "results.md").read_text()
    assert "| m | short, long | word_error_rate | 0.99 | [0.99, 0.99] | 50.00 | 50.00 | 2 |" in markdown


def test_pooled_bleu_and_chrf_are_sacrebleus_corpus_scores_over_every_datasets_pairs(ws):
    first = [("the cat sat on the mat", "the cat sat on a mat"), ("it is raining today", "it rains today"),
             ("we will meet at noon", "we will meet at noon")]
    second = [("a quick brown fox jumps", "the quick brown fox jumped"), ("open the door please", "please open the door"),
              ("she sells sea shells by the shore", "she sells shells by the sea shore"), ("good night", "good night everyone")]
    _, final = run_aggregate(ws, {"one": first, "two": second}, ["bleu", "chrf"])
    aggs = {a["metric"]: a for a in final["aggregates"]}
    hyps, refs = [h for _, h in first + second], [r for r, _ in first + second]
    assert aggs["bleu"]["pooled"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
    assert aggs["chrf"]["pooled"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score, abs=1e-9)
    scores = {(s["dataset"], s["metric"]): s["score"] for s in final["scores"]}
    assert aggs["bleu"]["unweighted_mean"] == pytest.approx((scores[("one", "bleu")] + scores[("two", "bleu")]) / 2)
    assert aggs["bleu"]["pooled"] != pytest.approx(aggs["bleu"]["unweighted_mean"])
    for agg in aggs.values():
        low, high = agg["pooled_ci95"]
        assert low <= agg["pooled"] <= high and low < high


def test_pooled_score_without_resamples_has_no_interval(ws):
    _, final = run_aggregate(ws, {"short": [("hello", "goodbye")], "long": [(HUNDRED_WORDS, HUNDRED_WORDS)]},
                             ["word_error_rate"], bootstrap_resamples=0)
    agg = final["aggregates"][0]
    assert agg["pooled"] == pytest.approx(100 / 101) and agg["pooled_ci95"] is None


def test_report_html_shows_the_pooled_score_beside_the_means(ws):
    run_aggregate(ws, {"short": [("hello", "goodbye")], "long": [(HUNDRED_WORDS, HUNDRED_WORDS)]}, ["word_error_rate"],
                  bootstrap_resamples=50)
    dom = parse(dump_dom((ws.root / "runs" / "t" / "report.html").as_uri()))
    rows = dom.by_id("aggregates").all("tr")
    header = [th.text.strip() for th in rows[0].all("th")]
    row = dict(zip(header, (td.text.strip() for td in rows[1].all("td"))))
    assert (row["Pooled"], row["Weighted mean"], row["Unweighted mean"]) == ("0.99", "50.00", "50.00")


def test_stratified_bootstrap_redraws_within_each_dataset():
    a = SampleStats(("a0", "a1"), np.array([[1.0, 1.0], [0.0, 1.0]]), ratio(100.0))
    b = SampleStats(("b0",), np.array([[0.0, 100.0]]), ratio(100.0))
    value, interval = pooled([a, b], 500, 1)
    assert value == pytest.approx(100 / 102)
    low, high = interval.ci95
    # Dataset a contributes 0, 1 or 2 errors over its 2 words; b always 0 over 100: nothing else is reachable.
    assert {round(low, 6), round(high, 6)} <= {0.0, round(100 / 102, 6), round(200 / 102, 6)}
    assert pooled([a, b], 500, 1) == (value, interval)  # the seed fixes the interval
