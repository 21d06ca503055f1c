"""Resume, the inference cache and the run modes (--skip-eval, --reeval, --force-reinfer)."""

import json

import pytest

from lalmeval.config.options import RunOptions
from lalmeval.run.runner import run
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import demo_rows, model

COUNT = 8
CACHE = {"cache": True}   # the cross-run inference cache is off unless a config (or --cache) asks for it


def setup(ws, **settings):
    rows = ws.copy_demo_audio(demo_rows(COUNT))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id", "instruction": "Transcribe."}})
    return rows


def answer_by_prompt_and_clip(seen, n):
    return f"reply {round(seen.audio_seconds[0], 3)}"


def go(ws, ep, run_id="r", options=RunOptions(), config=None, **settings):
    ws.config([model(ep.url, **settings)], [["cmds", "word_error_rate"]], **(config or {}))
    return run(ws.plan(), ws.root / "runs", run_id, quiet=True, options=options)


def test_same_run_id_resumes_without_requesting_finished_samples(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        first = go(ws, ep, options=RunOptions(use_cache=False))
        assert len(ep.requests) == COUNT
        again = go(ws, ep, options=RunOptions(use_cache=False))
        assert len(ep.requests) == COUNT  # nothing re-requested
    assert again.scores[0].score == first.scores[0].score and again.scores[0].num_samples == COUNT
    assert (first.reused, again.reused) == (0, COUNT)


def test_failed_samples_are_retried_on_resume(ws):
    setup(ws)
    # Each refusal names its own sample: a per-sample 400, not an endpoint refusing every request.
    flaky = lambda seen, n: Reply(status=400, payload={"error": {"message": f"bad sample {n}"}}) if n < 3 else "ok"
    with ScriptedEndpoint(flaky) as ep:
        first = go(ws, ep, options=RunOptions(use_cache=False), retry_attempts=0, batch_size=1)
        assert first.scores[0].num_failed == 3
        second = go(ws, ep, options=RunOptions(use_cache=False), retry_attempts=0, batch_size=1)
    assert len(ep.requests) == COUNT + 3 and second.scores[0].num_failed == 0


def test_changed_request_settings_are_not_served_from_stored_records(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, options=RunOptions(use_cache=False))
        go(ws, ep, options=RunOptions(use_cache=False, allow_config_change=True), max_tokens=32)
    assert len(ep.requests) == 2 * COUNT


@pytest.mark.parametrize("change", ["model id", "url", "inference type", "chunk size", "audio format", "system prompt"])
def test_resume_requests_again_when_anything_that_decides_the_reply_changed(ws, change):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep, ScriptedEndpoint(answer_by_prompt_and_clip) as other:
        go(ws, ep, options=RunOptions(use_cache=False))
        settings = {
            "model id": {"model": "another-model"}, "url": {"url": other.url}, "inference type": {"inference_type": "vllm"},
            "chunk size": {"chunk_size": 1.0}, "audio format": {"audio_format": "audio_url"}, "system prompt": {},
        }[change]
        extra = {"filters": {"system_prompts": ["concise"]}} if change == "system prompt" else None
        url = settings.pop("url", ep.url)
        ws.config([{**model(url), **settings}], [["cmds", "word_error_rate"]], **(extra or {}))
        again = run(ws.plan(), ws.root / "runs", "r", quiet=True, options=RunOptions(use_cache=False, allow_config_change=True))
        assert len(ep.requests) + len(other.requests) >= 2 * COUNT
    assert again.reused == 0 and again.scores[0].num_samples == COUNT


def test_resume_requests_again_a_sample_whose_audio_changed_behind_its_id(ws):
    rows = setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, options=RunOptions(use_cache=False))
        clip = ws.root / "data" / rows[0]["audio"]
        clip.write_bytes((ws.root / "data" / rows[1]["audio"]).read_bytes())  # same id, other audio
        again = go(ws, ep, options=RunOptions(use_cache=False))
    assert len(ep.requests) == COUNT + 1 and again.reused == COUNT - 1
    records = [json.loads(x) for x in (ws.root / "runs" / "r" / "records" / "cmds__m.jsonl").read_text().splitlines()]
    assert records[-1]["id"] == rows[0]["id"]


def test_distinct_model_names_get_distinct_files_even_when_their_safe_forms_would_meet(ws):
    setup(ws)
    with ScriptedEndpoint(lambda seen, n: "first") as a, ScriptedEndpoint(lambda seen, n: "second") as b:
        ws.config([model(a.url, name="m/1"), model(b.url, name="m 1")], [["cmds", "word_error_rate"]])
        result = run(ws.plan(), ws.root / "runs", "r", quiet=True, options=RunOptions(use_cache=False))
    files = sorted(p.name for p in (ws.root / "runs" / "r" / "records").iterdir())
    assert files == ["cmds__m%201.jsonl", "cmds__m%2F1.jsonl"]
    for name, answer in (("m%2F1", "first"), ("m%201", "second")):
        lines = (ws.root / "runs" / "r" / "records" / f"cmds__{name}.jsonl").read_text().splitlines()
        assert len(lines) == COUNT and all(json.loads(x)["prediction"] == answer for x in lines)
    assert {s.model for s in result.scores} == {"m/1", "m 1"}


def test_cache_serves_identical_requests_in_a_new_run(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        first = go(ws, ep, run_id="a", config=CACHE)
        second = go(ws, ep, run_id="b", config=CACHE)
        assert len(ep.requests) == COUNT
        go(ws, ep, run_id="c", config=CACHE, options=RunOptions(use_cache=False))
        assert len(ep.requests) == 2 * COUNT
    assert second.scores[0].score == first.scores[0].score
    records = ws.records("cmds", "m", "b")
    assert all((r["extra"]["cached"], r["extra"]["cached_from"], r["attempts"]) == (True, "a", 0) for r in records)
    assert (first.cache_hits, second.cache_hits) == (0, COUNT)


def test_cache_dir_key_places_the_cache(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, run_id="a", config={**CACHE, "cache_dir": str(ws.root / "mycache")})
    assert (ws.root / "mycache" / "m.jsonl").exists()


def test_sampled_requests_are_not_cached_unless_asked(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, run_id="a", temperature=0.7, config=CACHE)
        go(ws, ep, run_id="b", temperature=0.7, config=CACHE)
        assert len(ep.requests) == 2 * COUNT
        go(ws, ep, run_id="c", temperature=0.7, config={**CACHE, "cache_sampled": True})
        go(ws, ep, run_id="d", temperature=0.7, config={**CACHE, "cache_sampled": True})
        assert len(ep.requests) == 3 * COUNT


def test_cache_key_changes_with_prompt_and_audio(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, run_id="a", config=CACHE)
        go(ws, ep, run_id="a2", config=CACHE)
        assert len(ep.requests) == COUNT
        go(ws, ep, run_id="b", config={**CACHE, "filters": {"user_prompt_add_ons": ["asr_clean_output"]}})
    assert len(ep.requests) == 2 * COUNT


def test_skip_eval_then_reeval_without_any_endpoint(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        skipped = go(ws, ep, options=RunOptions(skip_eval=True))
    assert skipped.scores == [] and skipped.final_path is None
    assert len(ws.records("cmds", "m", "r")) == COUNT
    # The endpoint is gone; --reeval must not need it, nor launch anything.
    ws.config([model("http://127.0.0.1:9/v1", launch="exit 1")], [["cmds", "word_error_rate"]])
    rescored = run(ws.plan(), ws.root / "runs", "r", quiet=True, options=RunOptions(reeval=True))
    assert rescored.requests_sent == 0
    assert rescored.scores[0].num_samples == COUNT and rescored.scores[0].num_failed == 0


def test_reeval_counts_samples_without_stored_prediction_as_failed(ws):
    setup(ws)
    ws.config([model("http://127.0.0.1:9/v1")], [["cmds", "word_error_rate"]])
    result = run(ws.plan(), ws.root / "runs", "empty", quiet=True, options=RunOptions(reeval=True))
    assert result.scores[0].num_failed == COUNT and result.requests_sent == 0
    assert result.failures[0]["kind"] == "not inferred"


def test_force_reinfer_requests_everything_again(ws):
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep)
        go(ws, ep, options=RunOptions(force_reinfer=True))
    assert len(ep.requests) == 2 * COUNT


def test_final_scores_list_failures_by_reason(ws):
    setup(ws)
    script = lambda seen, n: Reply(status=500, payload={"error": {"message": "boom"}}) if n % 2 else "ok"
    with ScriptedEndpoint(script) as ep:
        result = go(ws, ep, retry_attempts=0, batch_size=1)
    final = json.loads(result.final_path.read_text())
    assert final["failures"] == [{"model": "m", "dataset": "cmds", "kind": "HTTP 500", "count": 4, "example": "HTTP 500: boom"}]


@pytest.mark.parametrize("settings,reused", [
    ({"generation_kwargs": {"extra_body": {"temperature": 1.0}}}, False),       # sampled at 1.0 whatever `temperature` says
    ({"temperature": 0.7, "generation_kwargs": {"extra_body": {"temperature": 0}}}, True),   # greedy as sent
    ({"temperature": 0.7, "generation_kwargs": {"extra_body": {"seed": 7}}}, True),          # seeded as sent
    ({"temperature": 0.7, "generation_kwargs": {"top_k": 1}}, True),                         # one candidate: greedy
    ({"generation_kwargs": {"extra_body": {"temperature": None}}}, False),      # the server's default temperature
])
def test_what_the_request_sends_decides_whether_its_reply_is_reused(ws, settings, reused):
    """vLLM users keep sampling settings in extra_body, whose keys replace the validated ones in the
    request: the temperature (and seed) actually sent decides whether a reply may be reused."""
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, run_id="a", config=CACHE, **settings)
        sent = {r.body.get("temperature") for r in ep.requests}
        go(ws, ep, run_id="b", config=CACHE, **settings)
        requests = len(ep.requests)
    cached = [r["id"] for r in ws.records("cmds", "m", "b") if r["extra"].get("cached")]
    if reused:
        assert requests == COUNT and len(cached) == COUNT, sent
    else:
        assert requests == 2 * COUNT and not cached, f"sent temperature {sent}; the second run sent {requests - COUNT} requests"


def test_a_reply_is_reused_only_for_the_same_api_version(ws):
    """An Azure-style endpoint evaluated with one api_version, then (new run id, same cache) with
    another: another API version is another request (`?api-version=` differs, and with it what the
    service does), so it is sent; a new token is not another request."""
    setup(ws)
    with ScriptedEndpoint(answer_by_prompt_and_clip) as ep:
        go(ws, ep, run_id="old", config=CACHE, api_version="2024-02-01", auth_token="azure-key-0123456789")
        go(ws, ep, run_id="same", config=CACHE, api_version="2024-02-01", auth_token="azure-key-9876543210")
        assert len(ep.requests) == COUNT  # only the credential changed: answered from the cache
        go(ws, ep, run_id="new", config=CACHE, api_version="2025-01-01", auth_token="azure-key-9876543210")
        versions = [s.query.get("api-version") for s in ep.requests]
        resumed = go(ws, ep, run_id="old", config=CACHE, options=RunOptions(allow_config_change=True), api_version="2025-01-01", auth_token="azure-key-0123456789")
    assert versions == ["2024-02-01"] * COUNT + ["2025-01-01"] * COUNT, f"requests sent: {versions}"
    assert resumed.reused == 0  # a stored prediction of the old version is not one of the new


def launched_questions(ws, count, **settings):
    """`count` text questions served by a launched echo server (`launch` command from
    settings["launch"](server command), default: the server itself); returns (rows, cli, rewrite):
    cli() runs the config as a subprocess, rewrite() writes the rows again after they are edited."""
    import socket
    import subprocess
    import sys

    from tests.support.workspace import REPO

    rows = [{"id": f"q{i}", "question": f"question w{i}", "reference": f"echo: w{i}"} for i in range(count)]
    rewrite = lambda: ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",  # noqa: E731
                                                            "textual_input_column": "question", "audio_column": None}})
    rewrite()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = f"{sys.executable} {REPO / 'tests' / 'support' / 'slow_server.py'} --port {port} --delay 0.01"
    launch = settings.pop("launch", lambda command: command)(server)
    entry = model(f"http://127.0.0.1:{port}/v1", launch=launch, launch_timeout=60, retry_attempts=0, **settings)
    config = ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    cli = lambda: subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "r", "--no-cache"],  # noqa: E731
                                 cwd=REPO, capture_output=True, text=True, timeout=180)
    return rows, cli, rewrite


def test_a_server_not_launched_up_front_is_launched_when_a_stored_answer_no_longer_holds(ws):
    """Every answer is stored, so a rerun launches nothing up front; but one question was corrected
    in the data since, so its request is owed after all: the server is launched then, the changed
    sample is requested, and the rerun completes (exit 0) with every sample scored."""
    rows, cli, rewrite = launched_questions(ws, 4)
    first = cli()
    assert first.returncode == 0, first.stderr
    rows[1].update(question="question w1b", reference="echo: w1b")
    rewrite()
    again = cli()
    assert again.returncode == 0, again.stderr[-800:]
    assert "launching m: a stored answer no longer matches its request" in again.stderr
    assert "Reused 3 stored prediction(s)" in again.stderr
    final = json.loads((ws.root / "runs" / "r" / "final_scores.json").read_text())["scores"][0]
    assert (final["num_samples"], final["num_failed"], final["score"]) == (4, 0, 100.0)


@pytest.mark.slow
def test_a_late_launch_that_fails_fails_every_changed_sample_with_its_reason(ws):
    """All answers stored, then every question changed and the launch command broken: each owed sample
    fails 'launch failed: …' — also those asked after the failure (they used to go to the dead port
    as connection errors) — and nothing is left running."""
    serve = ws.root / "serve.sh"

    def via_script(command):
        serve.write_text(f"exec {command}\n")
        return f"bash {serve}"

    rows, cli, rewrite = launched_questions(ws, 12, launch=via_script, batch_size=2)
    assert cli().returncode == 0
    for row in rows:
        row.update(question=row["question"] + "b")
    rewrite()
    serve.write_text("echo boom; exit 1\n")
    again = cli()
    final = json.loads((ws.root / "runs" / "r" / "final_scores.json").read_text())["scores"][0]
    assert again.returncode == 3 and final["num_failed"] == 12, again.stderr[-800:]
    assert final["details"]["failures"] == {"launch failed": 12}, final["details"]["failures"]
