"""The numbers a peer's own run prints: BLEU under the au_harness and lmms protocols against numbers computed with
the peers' code (tests/fixtures/peer_scores), and lalmeval's own number kept beside the peer's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lalmeval.metrics.bleu import Bleu
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record
from tests.support.workspace import runspec_dataset

HERE = Path(__file__).resolve().parent
FIXTURES = json.loads((HERE / "fixtures" / "peer_scores" / "bleu.json").read_text())
PAIRS = HERE / "data" / "protocols"


def pairs(name: str) -> list[dict]:
    return [json.loads(line) for line in (PAIRS / f"heldout_{name}.jsonl").read_text().splitlines()]


def bleu_of(ds, rows: list[dict]) -> tuple[float, dict]:
    metric = Bleu(ds, GeneralPostprocessor())
    items = [{"id": r["id"], **metric.score_record(Record(id=r["id"], prompt="", system=None, params={}, reference=r["reference"],
                                                          prediction=r["prediction"]))} for r in rows]
    return metric.aggregate(items)


CASES = FIXTURES["bleu"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['protocol']}-{c['set']}-to-{c['target_language']}" for c in CASES])
def test_bleu_under_a_peer_protocol_is_the_number_that_peers_code_prints(tmp_path, case):
    ds = runspec_dataset(tmp_path, language=case["language"], target_language=case["target_language"], protocol=case["protocol"],
                 reproduces=case["reproduces"], metrics=["bleu"])
    value, details = bleu_of(ds, pairs(case["set"]))
    assert round(value, 2) == round(case["printed"], 2)
    assert details["lalmeval"]["score_is"].startswith("as ")
    assert details["lalmeval"]["score"] != pytest.approx(value)  # raw texts score differently: both numbers are printed
    assert "normalizes both texts" in details["lalmeval"]["differs_by"]


def test_bleu_under_lalmevals_own_protocol_scores_the_texts_as_written_and_prints_one_number(tmp_path):
    ds = runspec_dataset(tmp_path, language="fr", target_language="en", metrics=["bleu"])
    value, details = bleu_of(ds, pairs("en"))
    peer = bleu_of(runspec_dataset(tmp_path / "au", language="fr", target_language="en", protocol="au_harness", metrics=["bleu"]), pairs("en"))
    assert "lalmeval" not in details and value == pytest.approx(peer[1]["lalmeval"]["score"])


METEOR = json.loads((HERE / "fixtures" / "peer_scores" / "meteor.json").read_text())


def test_meteor_under_au_harness_is_the_number_its_run_prints_pair_by_pair(tmp_path):
    from lalmeval.metrics.meteor import Meteor, wordnet_dir

    if wordnet_dir() is None:
        pytest.skip("WordNet 3.0 is not installed (apt-get install wordnet-base)")
    ds = runspec_dataset(tmp_path, language=METEOR["language"], protocol=METEOR["protocol"], metrics=["meteor"])
    metric = Meteor(ds, GeneralPostprocessor())
    rows = pairs(METEOR["set"])
    items = [{"id": r["id"], **metric.score_record(Record(id=r["id"], prompt="", system=None, params={}, reference=r["reference"],
                                                          prediction=r["prediction"]))} for r in rows]
    assert {x["id"]: round(x["score"] / 100, 3) for x in items} == METEOR["pairs"]
    value, details = metric.aggregate(items)
    assert round(value, 2) == METEOR["printed"]
    assert details["lalmeval"]["score"] != pytest.approx(value) and "METEOR splits at spaces" in details["lalmeval"]["differs_by"]


# --- a real run: the peer's number and lalmeval's own side by side -------------------------------------------


@pytest.fixture(scope="module")
def two_number_run(tmp_path_factory):
    """Mandarin held-out pairs scored by word_error_rate and English ones by bleu, both under au_harness."""
    from tests.support.endpoint import ScriptedEndpoint
    from tests.support.workspace import Workspace, model
    from tests.test_protocols import reply_by_id, text_dataset

    ws = Workspace(tmp_path_factory.mktemp("two_numbers"))
    replies = text_dataset(ws, "zh_au", pairs("zh")[:120], language="zh", protocol="au_harness")
    replies.update(text_dataset(ws, "st_au", [{**p, "id": f"s{p['id']}"} for p in pairs("en")[:120]], language="fr",
                                target_language="en", protocol="au_harness", reproduces="au_harness:covost2_fr_en"))
    with ScriptedEndpoint(reply_by_id(replies)) as ep:
        ws.config([model(ep.url)], [["zh_au", "word_error_rate"], ["st_au", "bleu"]], bootstrap_resamples=0)
        result = ws.run()
    return ws.root / "runs" / "t", result


def test_a_run_prints_the_peers_number_and_lalmevals_own_with_the_step_between_them(two_number_run):
    from lalmeval.reports.scores import score_table

    run_dir, result = two_number_run
    scores = {s["dataset"]: s for s in json.loads((run_dir / "final_scores.json").read_text())["scores"]}
    wer = scores["zh_au"]["details"]["lalmeval"]
    assert wer["score_is"] == "as AU-Harness prints it" and (wer["normalizer"], wer["unit"]) == ("chinese", "mixed")
    assert wer["score"] < scores["zh_au"]["score"] and "normalizer au_harness counting words" in wer["differs_by"]
    assert "normalizes both texts as English" in scores["st_au"]["details"]["lalmeval"]["differs_by"]
    table = score_table(result.scores, [])
    assert "lalmeval's own" in table.splitlines()[0] or "lalmeval's own" in table
    assert f"lalmeval's own number is {wer['score']:.2f}" in table
    html = (run_dir / "report.html").read_text()
    assert "lalmeval&#x27;s own" in html or "lalmeval's own" in html
    assert f"{wer['score']:.2f}</span>" in html and "they differ by normalization" in html


WER_CASES = json.loads((HERE / "fixtures" / "peer_scores" / "word_error_rate.json").read_text(encoding="utf-8"))["word_error_rate"]


@pytest.mark.parametrize("case", WER_CASES, ids=[f"{c['protocol']}-{c['normalizer']}-{c['set']}" for c in WER_CASES])
def test_a_task_that_scores_its_own_way_prints_what_its_peers_task_code_prints(tmp_path, case):
    from lalmeval.metrics.wer import WordErrorRate

    ds = runspec_dataset(tmp_path, language=case["language"], protocol=case["protocol"], normalizer=case["normalizer"], metrics=["word_error_rate"])
    metric = WordErrorRate(ds, GeneralPostprocessor())
    rows = case.get("pairs") or pairs(case["set"])  # inline pairs: references the peer's rules turn into nothing
    items = [{"id": r["id"], **metric.score_record(Record(id=r["id"], prompt="", system=None, params={}, reference=r["reference"],
                                                          prediction=r["prediction"]))} for r in rows]
    value, details = metric.aggregate(items)
    assert value == pytest.approx(case["wer"], abs=1e-5) and details["normalizer"] == case["normalizer"]
    assert all(x["score"] is not None for x in items)  # every pair counts, as the peer counts it


def test_scoring_parity_counts_an_entry_only_when_each_of_its_metrics_is_checked_against_the_peers_code(tmp_path):
    from scripts.check_parity import scoring_checks, scoring_verdict

    checks = scoring_checks()
    assert scoring_verdict(runspec_dataset(tmp_path / "a", language="zh", protocol="au_harness", metrics=["word_error_rate", "bleu", "meteor"]), checks) is None
    judged = runspec_dataset(tmp_path / "b", language="en", protocol="au_harness", metrics=["word_error_rate", "llm_judge_binary"])
    assert scoring_verdict(judged, checks) == "llm_judge_binary with judge template None: no check against the peer's code"
    peer_judge = runspec_dataset(tmp_path / "d", language="en", protocol="au_harness", judge_template="au_harness_binary_json", metrics=["llm_judge_binary"])
    assert scoring_verdict(peer_judge, checks) is None
    judged_elsewhere = runspec_dataset(tmp_path / "e", language="en", protocol="kimi", metrics=["llm_judge_detailed"])
    assert scoring_verdict(judged_elsewhere, checks) == "llm_judge_detailed with judge template None: no check against the peer's code"
    kimi_judge = runspec_dataset(tmp_path / "f", language="en", protocol="kimi", judge_template="kimi_open_qa", metrics=["llm_judge_detailed"])
    assert scoring_verdict(kimi_judge, checks) is None
    unchecked = runspec_dataset(tmp_path / "g", language="en", protocol="au_harness", metrics=["bertscore"])
    assert scoring_verdict(unchecked, checks) == "bertscore under au_harness: no check against the peer's code"
    other_rules = runspec_dataset(tmp_path / "c", language="en", protocol="lmms", normalizer="basic", metrics=["word_error_rate"])
    assert "normalizer basic" in scoring_verdict(other_rules, checks)


MC = json.loads((HERE / "fixtures" / "peer_scores" / "mc_parsers.json").read_text(encoding="utf-8"))
MC_CASES = [(parser, case) for parser in ("mmmu", "mmmu_letters") for case in MC[parser]]


@pytest.mark.parametrize("parser,case", MC_CASES, ids=[f"{p}-{i}" for i, (p, _) in enumerate(MC_CASES)])
def test_a_peers_multiple_choice_parser_picks_what_lmms_evals_own_code_picks(parser, case):
    from lalmeval.postprocess.extraction import extract_choice

    chosen = extract_choice(parser, case["reply"], MC["options"], ["A", "B", "C", "D"])
    assert (None if chosen is None else "ABCD"[chosen]) == (None if case["peer"] == "guess" else case["peer"])


MC_TASKS = json.loads((HERE / "fixtures" / "peer_scores" / "mc_tasks.json").read_text(encoding="utf-8"))
MC_TASK_CASES = [(c, reply, peer) for c in MC_TASKS["cases"] for reply, peer in zip(c["replies"], c["peer"])]


@pytest.mark.parametrize("case,reply,peer", MC_TASK_CASES, ids=[f"{c['task']}-{i}" for i, (c, _, _) in enumerate(MC_TASK_CASES)])
def test_multiple_choice_tasks_credit_the_option_lmms_evals_own_task_code_credits(case, reply, peer):
    from lalmeval.postprocess.extraction import extract_choice

    chosen = extract_choice(case["answer_extraction"], reply, case["options"], ["A", "B", "C", "D"])
    assert (None if chosen is None else "ABCD"[chosen]) == (None if peer in ("guess", "none") else peer)


def test_accuracy_under_a_guessing_parser_counts_each_guess_at_its_expected_value_and_says_so(tmp_path):
    from lalmeval.metrics.accuracy import Accuracy

    ds = runspec_dataset(tmp_path, language="en", protocol="lmms", choices_column="choices", answer_extraction="mmmu", metrics=["accuracy"])
    metric = Accuracy(ds, GeneralPostprocessor())
    replies = ["(C)", "I cannot tell.", "B", "None of them."]  # right, guessed, wrong, guessed
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference="C", prediction=reply,
                                        extra={"options": MC["options"], "gold": 2})) for i, reply in enumerate(replies)]
    value, details = metric.aggregate(items)
    assert value == pytest.approx(100 * (1 + 0.25 + 0 + 0.25) / 4)
    assert details["guessed"] == 2 and details["guessed_counted_as"].startswith("1/k")
    assert details["lalmeval"]["score"] == pytest.approx(25.0) and "random letter" in details["lalmeval"]["differs_by"]


VOICEBENCH = json.loads((HERE / "fixtures" / "peer_scores" / "voicebench_mcq.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", VOICEBENCH["cases"], ids=[f"vb-{i}" for i in range(len(VOICEBENCH["cases"]))])
def test_voicebench_multiple_choice_credits_the_letter_lmms_evals_own_code_credits(tmp_path, case):
    from lalmeval.metrics.accuracy import Accuracy
    from lalmeval.postprocess.voicebench_mcq import VoiceBenchMcqPostprocessor

    ds = runspec_dataset(tmp_path, language="en", protocol="lmms", postprocessor="VoiceBenchMcqPostprocessor", metrics=["accuracy"])
    metric = Accuracy(ds, VoiceBenchMcqPostprocessor())
    credited = [g for g in "ABCD" if metric.score_record(Record(id="x", prompt="", system=None, params={}, reference=g,
                                                                   prediction=case["reply"]))["score"] == 1.0]
    assert credited == ([case["peer"]] if case["peer"] else [])


VOCALSOUND = json.loads((HERE / "fixtures" / "peer_scores" / "vocalsound.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", VOCALSOUND["cases"], ids=[f"{c['version']}-{i}" for i, c in enumerate(VOCALSOUND["cases"])])
def test_vocalsound_reads_the_class_lmms_evals_own_code_credits(case):
    from lalmeval.postprocess.extraction import extract_choice

    chosen = extract_choice("vocalsound", case["reply"], VOCALSOUND["options"])
    assert (None if chosen is None else VOCALSOUND["options"][chosen]) == case["peer"]


EXACT = json.loads((HERE / "fixtures" / "peer_scores" / "exact_match.json").read_text(encoding="utf-8"))


def test_clotho_aqa_exact_match_credits_what_lmms_evals_own_exact_match_credits_and_prints_lalmevals_reading_beside(tmp_path):
    from lalmeval.metrics.accuracy import Accuracy

    for protocol in ("lmms", "lmms_v0.3"):
        ds = runspec_dataset(tmp_path / protocol, language="en", protocol=protocol, answer_extraction="exact_match", metrics=["accuracy"])
        metric = Accuracy(ds, GeneralPostprocessor())
        items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=c["reference"],
                                            prediction=GeneralPostprocessor().process(c["reply"])))
                 for i, c in enumerate(EXACT["cases"])]
        assert [x["score"] for x in items] == [c["peer"] for c in EXACT["cases"]]
        value, details = metric.aggregate(items)
        assert value == pytest.approx(100 * sum(c["peer"] for c in EXACT["cases"]) / len(EXACT["cases"]))
        own = details["lalmeval"]
        assert own["score"] == pytest.approx(100 * sum(x["own_score"] for x in items) / len(items))
        assert own["score"] != value and own["differs_by"].startswith("answer matching")
        guillemets = next(x for x, c in zip(items, EXACT["cases"]) if c["reply"] == "«Yes»")
        assert (guillemets["score"], guillemets["own_score"]) == (0.0, 1.0)  # not ASCII punctuation to lmms-eval


def test_exact_match_on_a_multiple_choice_dataset_is_refused_with_the_fix(tmp_path):
    from lalmeval.errors import UserError

    with pytest.raises(UserError, match="answer_extraction exact_match reads a free answer, and this dataset is multiple choice: use a multiple-choice extraction"):
        runspec_dataset(tmp_path, language="en", answer_extraction="exact_match", choices_column="choices", target_column="answer", metrics=["accuracy"])


REFUSAL = json.loads((HERE / "fixtures" / "peer_scores" / "voicebench_refusal.json").read_text(encoding="utf-8"))


def test_voicebench_advbench_counts_the_refusals_lmms_evals_own_code_counts_without_a_reference(tmp_path):
    from lalmeval.metrics.accuracy import Accuracy

    ds = runspec_dataset(tmp_path, language="en", protocol="lmms", answer_extraction="refusal", metrics=["accuracy"])
    metric = Accuracy(ds, GeneralPostprocessor())
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=None, prediction=reply))
             for i, reply in enumerate(REFUSAL["replies"])]
    assert [100.0 * x["score"] for x in items] == REFUSAL["peer"]
    value, details = metric.aggregate(items)
    assert value == pytest.approx(REFUSAL["printed"]) and details["scored"] == len(REFUSAL["replies"])


VGGSOUND = json.loads((HERE / "fixtures" / "peer_scores" / "vggsound.json").read_text(encoding="utf-8"))


def test_vggsound_credits_the_labels_lmms_evals_own_code_credits(tmp_path):
    from lalmeval.metrics.accuracy import Accuracy

    ds = runspec_dataset(tmp_path, language="en", protocol="lmms", answer_extraction="whole_label", metrics=["accuracy"])
    metric = Accuracy(ds, GeneralPostprocessor())
    for case in VGGSOUND["cases"]:
        item = metric.score_record(Record(id="1", prompt="", system=None, params={}, reference=case["reference"], prediction=case["reply"]))
        assert item["score"] == (None if not case["reference"].strip() else case["peer"]), case  # no reference: unscored here, 0 there
