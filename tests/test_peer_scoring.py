"""The numbers a peer's own run prints: BLEU under the au_harness and lmms protocols against numbers computed with
the peers' code (tests/fixtures/peer_scores), and lalmeval's own number kept beside the peer's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lalmeval.metrics.bleu import Bleu
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.records import Record
from lalmeval.runspecs import Catalog

HERE = Path(__file__).resolve().parent
FIXTURES = json.loads((HERE / "fixtures" / "peer_scores" / "bleu.json").read_text())
PAIRS = HERE / "data" / "protocols"


def pairs(name: str) -> list[dict]:
    return [json.loads(line) for line in (PAIRS / f"heldout_{name}.jsonl").read_text().splitlines()]


def dataset(tmp_path: Path, **fields):
    folder = tmp_path / "runspecs" / "st"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.json").write_text(json.dumps({"d": {"hf_repo": "x.jsonl", **fields}}))
    return Catalog.load([tmp_path / "runspecs"]).datasets["d"]


def bleu_of(ds, rows: list[dict]) -> tuple[float, dict]:
    metric = Bleu(ds, GeneralPostprocessor())
    items = [{"id": r["id"], **metric.score_record(Record(id=r["id"], prompt="", system=None, params={}, reference=r["reference"],
                                                          prediction=r["prediction"]))} for r in rows]
    return metric.aggregate(items)


CASES = FIXTURES["bleu"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['protocol']}-{c['set']}-to-{c['target_language']}" for c in CASES])
def test_bleu_under_a_peer_protocol_is_the_number_that_peers_code_prints(tmp_path, case):
    ds = dataset(tmp_path, language=case["language"], target_language=case["target_language"], protocol=case["protocol"],
                 reproduces=case["reproduces"], metrics=["bleu"])
    value, details = bleu_of(ds, pairs(case["set"]))
    assert round(value, 2) == round(case["printed"], 2)
    assert details["lalmeval"]["score_is"].startswith("as ")
    assert details["lalmeval"]["score"] != pytest.approx(value)  # raw texts score differently: both numbers are printed
    assert "normalizes both texts" in details["lalmeval"]["differs_by"]


def test_bleu_under_lalmevals_own_protocol_scores_the_texts_as_written_and_prints_one_number(tmp_path):
    ds = dataset(tmp_path, language="fr", target_language="en", metrics=["bleu"])
    value, details = bleu_of(ds, pairs("en"))
    peer = bleu_of(dataset(tmp_path / "au", language="fr", target_language="en", protocol="au_harness", metrics=["bleu"]), pairs("en"))
    assert "lalmeval" not in details and value == pytest.approx(peer[1]["lalmeval"]["score"])


METEOR = json.loads((HERE / "fixtures" / "peer_scores" / "meteor.json").read_text())


def test_meteor_under_au_harness_is_the_number_its_run_prints_pair_by_pair(tmp_path):
    from lalmeval.metrics.meteor import Meteor, wordnet_dir

    if wordnet_dir() is None:
        pytest.skip("WordNet 3.0 is not installed (apt-get install wordnet-base)")
    ds = dataset(tmp_path, language=METEOR["language"], protocol=METEOR["protocol"], metrics=["meteor"])
    metric = Meteor(ds, GeneralPostprocessor())
    rows = pairs(METEOR["set"])
    items = [{"id": r["id"], **metric.score_record(Record(id=r["id"], prompt="", system=None, params={}, reference=r["reference"],
                                                          prediction=r["prediction"]))} for r in rows]
    assert {x["id"]: round(x["score"] / 100, 3) for x in items} == METEOR["pairs"]
    value, details = metric.aggregate(items)
    assert round(value, 2) == METEOR["printed"]
    assert details["lalmeval"]["score"] != pytest.approx(value) and "METEOR splits at spaces" in details["lalmeval"]["differs_by"]
