"""Provenance in every run: lalmeval's version and commit, start/end, data content hashes, the config's hash without secrets."""

import hashlib
import json
import subprocess

from lalmeval.cli.commands import main
from lalmeval.version import __version__
from tests.support.endpoint import ScriptedEndpoint, answer_by_number
from tests.support.workspace import REPO, model


def final(ws, run_id):
    return json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())


def test_final_scores_record_version_commit_times_data_hash_and_config_hash(ws):
    ws.text_questions(5)
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "word_error_rate"]])
        ws.run("p")
    found = final(ws, "p")["provenance"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert found["version"] == __version__ and found["commit"] == head and isinstance(found["dirty"], bool)
    assert found["started"] <= found["finished"] and found["duration_s"] >= 0
    data = (ws.root / "data" / "set.jsonl").read_bytes()
    assert found["data_hashes"]["qs"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(found["config_hash"]) == 64
    page = (ws.root / "runs" / "p" / "report.html").read_text()
    assert head[:12] in page and found["data_hashes"]["qs"]["sha256"][:16] in page


def test_config_hash_leaves_secrets_out(ws):
    ws.text_questions(3)
    hashes = []
    with ScriptedEndpoint(answer_by_number) as ep:
        for run_id, token in (("a", "sk-first-secret-token-1234567890"), ("b", "sk-other-secret-token-0987654321")):
            ws.config([model(ep.url, auth_token=token)], [["qs", "word_error_rate"]])
            ws.run(run_id)
            text = (ws.root / "runs" / run_id / "final_scores.json").read_text()
            assert token not in text
            hashes.append(final(ws, run_id)["provenance"]["config_hash"])
    assert hashes[0] == hashes[1]


def test_compare_refuses_runs_whose_data_content_changed_behind_the_same_ids(ws, capsys):
    ws.text_questions(6)
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "word_error_rate"]])
        ws.run("before")
        path = ws.root / "data" / "set.jsonl"
        path.write_text(path.read_text().replace("question 5", "question  5"))   # the request text changes, not the ids
        ws.run("after")
    assert main(["compare", str(ws.root / "runs" / "before"), str(ws.root / "runs" / "after"), "--html", ""]) == 2
    assert "qs: the data differ" in capsys.readouterr().err


def test_a_hub_dataset_is_identified_by_the_commit_the_local_hub_cache_holds(tmp_path, monkeypatch):
    from pathlib import Path

    from lalmeval.catalog.runspecs import Dataset, DatasetSpec
    from lalmeval.data.fingerprint import data_hash
    from tests.support.hubcache import cached_repo, use_cache

    cache = use_cache(monkeypatch, tmp_path / "hub-cache")
    made = tmp_path / "made"
    made.mkdir()
    (made / "test.jsonl").write_text('{"id": "a", "reference": "x"}\n')
    snapshot = cached_repo(cache, "acme/speech", made)
    spec = DatasetSpec(hf_repo="acme/speech", language="en")
    found = data_hash(Dataset("speech", "asr", "asr", spec, Path(tmp_path / "runspec.json")))
    assert found == {"hub": "acme/speech", "revision": snapshot.name}
