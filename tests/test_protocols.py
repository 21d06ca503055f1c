"""Scoring protocols: the peers' conventions reproduced on held-out text, presets, and their printout in a real run.

tests/data/protocols holds our own held-out pairs (heldout_<set>.jsonl, written by make_heldout.py)
and expected.json: the numbers each reference implementation produced on them, run from its own
code (README, Metrics, Scoring protocols, says how).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from lalmeval.catalog.protocols import SCORING_PROTOCOLS
from lalmeval.catalog.runspecs import Catalog
from lalmeval.errors import UserError
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record
from tests.support.browser import dump_dom, parse
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model

DATA = Path(__file__).resolve().parent / "data" / "protocols"
EXPECTED = json.loads((DATA / "expected.json").read_text())["conventions"]


def heldout(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"heldout_{name}.jsonl").read_text().splitlines()]


def catalog(tmp_path: Path, datasets: dict[str, dict]) -> Catalog:
    """A runspec file with these dataset entries, loaded as a run loads it."""
    folder = tmp_path / "runspecs" / "asr"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "heldout.json").write_text(json.dumps({k: {"hf_repo": "x.jsonl", **v} for k, v in datasets.items()}))
    return Catalog.load([tmp_path / "runspecs"])


def score_pairs(dataset, pairs) -> tuple[list[dict], dict]:
    metric = WordErrorRate(dataset, GeneralPostprocessor())
    items = [{"id": p["id"], **metric.score_record(Record(id=p["id"], prompt="", system=None, params={}, reference=p["reference"],
                                                           prediction=p["prediction"]))} for p in pairs]
    return items, metric.aggregate(items)[1]


CASES = [(protocol, name) for protocol, convention in EXPECTED.items() for name in convention["sets"]]


@pytest.mark.parametrize("protocol,name", CASES, ids=[f"{p}-{n}" for p, n in CASES])
def test_protocol_reproduces_the_reference_implementations_numbers_on_heldout_pairs(tmp_path, protocol, name):
    expected = EXPECTED[protocol]["sets"][name]
    pairs = heldout(name)
    by_language: dict[str, list[dict]] = {}
    for pair in pairs:
        by_language.setdefault(pair.get("language", name), []).append(pair)
    loaded = catalog(tmp_path, {f"set_{lang}": {"language": lang, "protocol": protocol} for lang in by_language})
    for language, group in by_language.items():
        items, details = score_pairs(loaded.datasets[f"set_{language}"], group)
        normalizers = EXPECTED[protocol].get("normalizers", {})
        assert details["normalizer"] == normalizers.get(language, normalizers.get("*", protocol))
        got = {x["id"]: [x["errors"], x["ref_tokens"]] for x in items}
        assert got == {p["id"]: expected["pairs"][p["id"]] for p in group}  # every pair: errors and reference tokens
        corpus = expected["corpus"][language]
        assert 100 * details["corpus_wer"] == pytest.approx(corpus["wer"], abs=1e-5)
        assert details["reference_tokens"] == corpus["reference_tokens"]
        if "printed" in corpus:  # the number the peer's run prints, to its two decimals
            assert round(100 * details["corpus_wer"], 2) == corpus["printed"]


def test_conventions_disagree_on_the_same_text_so_the_check_above_can_fail(tmp_path):
    pairs = heldout("zh")
    loaded = catalog(tmp_path, {"ours": {"language": "zh"}, "kimi": {"language": "zh", "protocol": "kimi"},
                                "lmms": {"language": "zh", "protocol": "lmms"}})
    rates = {name: score_pairs(loaded.datasets[name], pairs)[1]["corpus_wer"] for name in ("ours", "kimi", "lmms")}
    assert len({round(r, 4) for r in rates.values()}) == 3, rates


def test_a_protocol_presets_normalizer_and_unit_by_language_and_runspec_fields_win(tmp_path):
    loaded = catalog(tmp_path, {
        "zh_kimi": {"language": "zh", "protocol": "kimi"},
        "en_kimi": {"language": "english", "protocol": "kimi"},
        "zh_lmms": {"language": "zh", "protocol": "lmms"},
        "zh_kimi_chars": {"language": "zh", "protocol": "kimi", "error_unit": "character"},
        "en_open_asr_basic": {"language": "en", "protocol": "open_asr", "normalizer": "basic"},
        "zh_default": {"language": "zh"},
    })
    spec = {name: (d.spec.normalizer, d.spec.error_unit) for name, d in loaded.datasets.items()}
    assert spec["zh_kimi"] == ("kimi", "mixed") and spec["en_kimi"] == ("kimi", "word")
    assert spec["zh_lmms"] == ("lmms", "character")
    assert spec["zh_kimi_chars"] == ("kimi", "character")
    assert spec["en_open_asr_basic"] == ("basic", "word")
    assert spec["zh_default"] == (None, None)  # lalmeval presets nothing: the metric's language defaults apply
    assert loaded.datasets["zh_default"].spec.protocol == "lalmeval"


def test_protocol_names_a_version_and_a_wrong_one_is_refused(tmp_path):
    assert catalog(tmp_path, {"a": {"language": "zh", "protocol": "kimi@1"}}).datasets["a"].spec.normalizer == "kimi"
    with pytest.raises(UserError, match=r"heldout.json: dataset 'b': protocol: protocol 'kimi' is version 1 here, not 2"):
        catalog(tmp_path, {"b": {"language": "zh", "protocol": "kimi@2"}})


def test_an_unknown_protocol_names_the_file_dataset_and_closest_name(tmp_path):
    with pytest.raises(UserError, match=r"heldout.json: dataset 'a': protocol: unknown protocol 'kimmi' \(did you mean 'kimi'\?\); "
                                        r"valid protocols: au_harness, kimi, lalmeval, lmms, lmms_v0.3, open_asr"):
        catalog(tmp_path, {"a": {"language": "zh", "protocol": "kimmi"}})


def test_open_asr_is_english_only(tmp_path):
    with pytest.raises(UserError, match="dataset 'a': protocol 'open_asr' has no convention for language 'de'"):
        catalog(tmp_path, {"a": {"language": "german", "protocol": "open_asr"}})


def test_au_harness_scores_every_language_as_its_runs_do_with_english_rules_and_words(tmp_path):
    loaded = catalog(tmp_path, {lang: {"language": lang, "protocol": "au_harness"} for lang in ("zh", "de", "ja")})
    assert {(d.spec.normalizer, d.spec.error_unit) for d in loaded.datasets.values()} == {("au_harness", "word")}
    metric = WordErrorRate(loaded.datasets["zh"], GeneralPostprocessor())
    assert metric.tokens("我明天下午3点。") == ["我明天下午three点"]  # English num2words, the sentence one word
    german = WordErrorRate(loaded.datasets["de"], GeneralPostprocessor())
    assert german.tokens("Wir treffen uns um 8 Uhr.") == ["wir", "treffen", "uns", "8", "uhr"]  # 'um' is an English filler


def test_open_asr_merges_compounds_in_the_alignment_and_says_so(tmp_path):
    loaded = catalog(tmp_path, {"oasr": {"language": "en", "protocol": "open_asr"}, "ours": {"language": "en"}})
    pairs = [{"id": "1", "reference": "the white paper is out", "prediction": "the whitepaper is out"},
             {"id": "2", "reference": "a well-known author", "prediction": "a wellknown author"}]
    _, oasr = score_pairs(loaded.datasets["oasr"], pairs)
    _, ours = score_pairs(loaded.datasets["ours"], pairs)
    assert oasr["corpus_wer"] == 0 and oasr["alignment"] == "levenshtein, compounds merged"
    assert ours["corpus_wer"] > 0 and ours["alignment"] == "levenshtein"


def test_every_registered_protocol_says_where_its_convention_is_defined():
    for name in SCORING_PROTOCOLS.names():
        protocol = SCORING_PROTOCOLS.get(name)
        assert protocol.label == f"{name}@{protocol.version}" and protocol.summary and protocol.source


# --- a real run: the protocol and what was used, printed in final_scores.json, results.csv/.md and report.html


def text_dataset(ws, name: str, pairs: list[dict], **spec) -> dict[str, str]:
    """A text-modality dataset whose question is the pair's id; returns id → the reply to send."""
    rows = [{"id": p["id"], "question": f"say {p['id']}", "reference": p["reference"]} for p in pairs]
    ws.runspec("asr", name, {name: {"hf_repo": ws.jsonl(rows, f"data/{name}.jsonl"), "id_column": "id", "modality": "text",
                                    "textual_input_column": "question", "audio_column": None, **spec}})
    return {p["id"]: p["prediction"] for p in pairs}


def reply_by_id(replies: dict[str, str]):
    return lambda seen, n: replies[seen.text.split()[-1]]


@pytest.fixture(scope="module")
def protocol_run(tmp_path_factory):
    """Mandarin held-out pairs under kimi, English ones under open_asr and under lalmeval's defaults, one model."""
    from tests.support.workspace import Workspace

    ws = Workspace(tmp_path_factory.mktemp("protocols"))
    replies = {}
    replies.update(text_dataset(ws, "zh_kimi", heldout("zh"), language="zh", protocol="kimi",
                                instruction="Transcribe:", generation_kwargs={"max_tokens": 64}))
    replies.update(text_dataset(ws, "en_oasr", heldout("en"), language="en", protocol="open_asr@1"))
    replies.update({f"d{p['id']}": p["prediction"] for p in heldout("en")[:40]})
    text_dataset(ws, "en_default", [{**p, "id": f"d{p['id']}"} for p in heldout("en")[:40]], language="en")
    with ScriptedEndpoint(reply_by_id(replies)) as ep:
        ws.config([model(ep.url, temperature=0.0, batch_size=16)],
                  [["zh_kimi", "word_error_rate"], ["en_oasr", "word_error_rate"], ["en_default", "word_error_rate"], ["en_default", "bleu"]],
                  bootstrap_resamples=50)
        result = ws.run()
    return ws.root / "runs" / "t", result


def test_a_real_run_scores_each_dataset_by_its_protocol_to_the_reference_numbers(protocol_run):
    _, result = protocol_run
    scores = {s.dataset: s for s in result.scores if s.metric == "word_error_rate"}
    assert scores["zh_kimi"].score == pytest.approx(EXPECTED["kimi"]["sets"]["zh"]["corpus"]["zh"]["wer"], abs=1e-5)
    assert scores["en_oasr"].score == pytest.approx(EXPECTED["open_asr"]["sets"]["en"]["corpus"]["en"]["wer"], abs=1e-5)
    assert scores["zh_kimi"].num_samples == 450 and scores["zh_kimi"].num_failed == 0


def test_final_scores_print_the_protocol_and_what_was_used(protocol_run):
    run_dir, _ = protocol_run
    scores = {(s["dataset"], s["metric"]): s for s in json.loads((run_dir / "final_scores.json").read_text())["scores"]}
    kimi = scores[("zh_kimi", "word_error_rate")]["details"]["protocol"]
    assert kimi["name"] == "kimi" and kimi["version"] == "1" and "Kimi-Audio-Evalkit" in kimi["source"]
    assert (kimi["normalizer"], kimi["error_unit"], kimi["alignment"]) == ("kimi", "mixed", "levenshtein")
    assert kimi["prompt"] == {"instruction": "Transcribe:"}
    assert kimi["generation"] == {"temperature": 0.0, "max_tokens": 64}
    oasr = scores[("en_oasr", "word_error_rate")]["details"]["protocol"]
    assert (oasr["name"], oasr["normalizer"], oasr["alignment"]) == ("open_asr", "open_asr", "levenshtein, compounds merged")
    default = scores[("en_default", "word_error_rate")]["details"]["protocol"]
    assert (default["name"], default["normalizer"], default["error_unit"]) == ("lalmeval", "whisper_english", "word")
    bleu = scores[("en_default", "bleu")]["details"]["protocol"]
    assert bleu["tokenizer"] == "13a" and "normalizer" not in bleu


def test_results_csv_and_md_print_each_scores_protocol(protocol_run):
    run_dir, _ = protocol_run
    rows = {(r["dataset"], r["metric"]): r for r in csv.DictReader((run_dir / "results.csv").open())}
    kimi = rows[("zh_kimi", "word_error_rate")]
    assert (kimi["protocol"], kimi["normalizer"], kimi["error_unit"], kimi["alignment"]) == ("kimi@1", "kimi", "mixed", "levenshtein")
    assert json.loads(kimi["generation"]) == {"temperature": 0.0, "max_tokens": 64}
    assert json.loads(kimi["prompt"]) == {"instruction": "Transcribe:"}
    assert rows[("en_default", "bleu")]["tokenizer"] == "13a" and rows[("en_default", "bleu")]["protocol"] == "lalmeval@2"
    markdown = (run_dir / "results.md").read_text()
    assert "## Scoring protocols" in markdown
    assert "| m | zh_kimi | word_error_rate | kimi@1 | kimi | mixed | levenshtein |  |  | " in markdown
    assert "| m | en_oasr | word_error_rate | open_asr@1 | open_asr | word | levenshtein, compounds merged |" in markdown


def test_report_html_shows_a_protocols_section(protocol_run):
    run_dir, _ = protocol_run
    dom = parse(dump_dom((run_dir / "report.html").as_uri()))
    section = dom.by_id("protocols")
    rows = section.all("tr")
    header = [th.text.strip() for th in rows[0].all("th")]
    table = [dict(zip(header, (td.text.strip() for td in tr.all("td")))) for tr in rows[1:]]
    kimi = next(r for r in table if r["Dataset"] == "zh_kimi")
    assert (kimi["Protocol"], kimi["Normalizer"], kimi["Unit"]) == ("kimi@1", "kimi", "mixed")
    assert json.loads(kimi["Generation"]) == {"temperature": 0.0, "max_tokens": 64}
    assert any(r["Dataset"] == "en_oasr" and r["Alignment"] == "levenshtein, compounds merged" for r in table)
    assert re.search(r'href="#protocols"', (run_dir / "report.html").read_text())


def test_a_judge_template_is_printed_with_the_protocol_of_a_judged_score(ws):
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(2)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question",
                                          "audio_column": None, "language": "zh", "judge_template": "kimi_yes_no"}})
    verdicts = ["Explanation: same.\nResult: yes", "Explanation: different.\nResult: no"]
    with ScriptedEndpoint(lambda seen, n: f"answer {seen.text.split()[-1]}") as m, \
            ScriptedEndpoint(lambda seen, n: verdicts[int(re.search(r"question (\d+)", seen.text).group(1))]) as j:
        ws.config([model(m.url)], [["qs", "llm_judge_binary"]], judge_properties={"judge_model": "judge-1", "judge_api_endpoint": j.url})
        ws.run()
    run_dir = ws.root / "runs" / "t"
    details = json.loads((run_dir / "final_scores.json").read_text())["scores"][0]["details"]
    assert details["protocol"]["name"] == "lalmeval" and details["protocol"]["judge_template"] == details["judge_template"]
    assert details["judge_template"]["name"] == "kimi_yes_no" and len(details["judge_template"]["sha256"]) == 64
    row = next(csv.DictReader((run_dir / "results.csv").open()))
    assert row["judge_template"] == f"kimi_yes_no (sha256 {details['judge_template']['sha256'][:12]})" and row["normalizer"] == ""
    assert f"| lalmeval@2 |  |  |  |  | kimi_yes_no (sha256 {details['judge_template']['sha256'][:12]}) |" in (run_dir / "results.md").read_text()


def _kaldialign_cell_by_cell(reference: list[str], hypothesis: list[str]) -> tuple[int, int, int]:
    """kaldialign's LevenshteinEditDistanceCompound as written: each cell keeps (cost, S, D, I) of its chosen move."""
    table = [[(j, 0, 0, j) for j in range(len(hypothesis) + 1)]]
    for i in range(1, len(reference) + 1):
        row = [(i, 0, i, 0)]
        for j in range(1, len(hypothesis) + 1):
            diagonal, above, left = table[i - 1][j - 1], table[i - 1][j], row[j - 1]
            same = reference[i - 1] == hypothesis[j - 1]
            sub, dele, ins = diagonal[0] + (not same), above[0] + 1, left[0] + 1
            if sub < ins and sub < dele:
                cell = diagonal if same else (sub, diagonal[1] + 1, diagonal[2], diagonal[3])
            elif dele < ins:
                cell = (dele, above[1], above[2] + 1, above[3])
            else:
                cell = (ins, left[1], left[2], left[3] + 1)
            merged = reference[i - 1]
            for k in range(2, i + 1):
                merged = reference[i - k] + merged
                if merged == hypothesis[j - 1] and table[i - k][j - 1][0] < cell[0]:
                    cell = table[i - k][j - 1]
            merged = hypothesis[j - 1]
            for k in range(2, j + 1):
                merged = hypothesis[j - k] + merged
                if merged == reference[i - 1] and table[i - 1][j - k][0] < cell[0]:
                    cell = table[i - 1][j - k]
            row.append(cell)
        table.append(row)
    return table[-1][-1][1:]


def test_compound_alignment_counts_what_kaldialigns_recurrence_counts_tie_for_tie():
    import random

    from lalmeval.metrics.compounds import compound_edit_counts
    from lalmeval.metrics.wer import edit_counts

    rng = random.Random(5)
    vocab = ["a", "b", "ab", "ba", "aba", "abab", "c", "abc", "white", "paper", "whitepaper", "e", "mail", "email"]
    merged = 0
    for _ in range(400):
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        expected = _kaldialign_cell_by_cell(ref, hyp)
        assert compound_edit_counts(ref, hyp) == expected, (ref, hyp)
        merged += sum(expected) < sum(edit_counts(ref, hyp))  # a compound move made it cheaper than Levenshtein
    assert merged > 50
