"""A --run-id whose stored config.yaml asks for another evaluation is refused unless --allow-config-change."""

import sys

import pytest
import yaml

from lalmeval.cli.commands import main
from tests.support.endpoint import AnyPathEndpoint, ScriptedEndpoint, answer_by_number
from tests.support.workspace import REPO, demo_rows, model


def setup(ws):
    rows = ws.copy_demo_audio(demo_rows(3))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"},
                                   "cmds_b": {"hf_repo": ws.jsonl(rows, "data/b.jsonl"), "id_column": "id"}})


def configure(ws, url, models=None, pairs=(("cmds", "word_error_rate"),), **extra):
    models = models or [model(url)]
    return ws.config(models, [list(p) for p in pairs], output_dir=str(ws.root / "runs"), **extra)


def run(ws, *flags):
    return main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "r", *flags])


def run_files(ws):
    root = ws.root / "runs" / "r"
    return (root / "config.yaml").read_bytes(), (root / "final_scores.json").read_bytes()


CHANGES = {
    "model id": ({"model": "another-model"}, {}, "models[m].model: 'scripted-m' → 'another-model'"),
    "temperature": ({"temperature": 0.5}, {}, "models[m].temperature: 0.0 → 0.5"),
    "dataset": ({}, {"pairs": [("cmds", "word_error_rate"), ("cmds_b", "word_error_rate")]}, "dataset_metric: "),
    "system prompt": ({}, {"filters": {"system_prompts": ["concise"]}}, "filters.system_prompts: [] → ['concise']"),
    "sample count": ({}, {"filters": {"num_samples": 2}}, "filters.num_samples: None → 2"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_resuming_under_a_different_evaluation_is_refused_and_touches_nothing(ws, capsys, change):
    setup(ws)
    settings, extra, named = CHANGES[change]
    with ScriptedEndpoint() as ep:
        configure(ws, ep.url)
        assert run(ws) == 0
        before = run_files(ws)
        configure(ws, ep.url, models=[model(ep.url, **settings)], **extra)
        capsys.readouterr()
        assert run(ws) == 2
        assert len(ep.requests) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
    assert f"{ws.root / 'runs' / 'r'} holds a run of a different config" in err[0] and "--allow-config-change" in err[0]
    assert run_files(ws) == before


def test_allow_config_change_continues_the_run_under_the_new_config(ws):
    setup(ws)
    with ScriptedEndpoint() as ep:
        configure(ws, ep.url)
        assert run(ws) == 0
        configure(ws, ep.url, models=[model(ep.url, model="another-model")])
        assert run(ws, "--allow-config-change") == 0
        assert len(ep.requests) == 6  # a changed model id is requested again
    stored = yaml.safe_load((ws.root / "runs" / "r" / "config.yaml").read_text())
    assert stored["models"][0]["model"] == "another-model"


def test_settings_that_only_deliver_requests_or_keep_files_may_change(ws):
    setup(ws)
    with ScriptedEndpoint() as ep:
        configure(ws, ep.url, models=[model(ep.url, "a"), model(ep.url, "b")])
        assert run(ws) == 0
        changed = dict(timeout=30, batch_size=1, retry_attempts=7, delay=1, max_reply_mb=2, verify_ssl=False, auth_token="tok-123456")
        # The models in another order are the same evaluation too.
        configure(ws, ep.url, models=[model(ep.url, "b", **changed), model(ep.url, "a")],
                  cache_dir=str(ws.root / "elsewhere"), streaming=True, cache=True, max_failure_rate=0.5)
        assert run(ws) == 0
        assert len(ep.requests) == 6  # nothing requested again


def test_reeval_may_point_the_models_elsewhere_and_change_the_metrics_but_not_the_datasets(ws, capsys):
    setup(ws)
    with ScriptedEndpoint() as ep:
        configure(ws, ep.url)
        assert run(ws, "--skip-eval") == 0
    configure(ws, "http://127.0.0.1:9/v1")  # the endpoint is gone: --reeval sends nothing
    assert run(ws, "--reeval") == 0
    configure(ws, "http://127.0.0.1:9/v1", pairs=[("cmds", "bleu")])   # scoring the stored answers otherwise asks for nothing new
    assert run(ws, "--reeval") == 0
    configure(ws, "http://127.0.0.1:9/v1", pairs=[("cmds", "bleu")], filters={"num_samples": 1})
    capsys.readouterr()
    assert run(ws, "--reeval") == 2   # other samples are another evaluation
    assert "filters" in capsys.readouterr().err


def test_a_run_stored_before_a_key_existed_compares_that_key_by_its_default(ws):
    setup(ws)
    with ScriptedEndpoint() as ep:
        configure(ws, ep.url)
        assert run(ws) == 0
        stored = ws.root / "runs" / "r" / "config.yaml"
        data = yaml.safe_load(stored.read_text())
        del data["models"][0]["temperature"], data["seed"]  # as an older version would have written it
        stored.write_text(yaml.safe_dump(data))
        assert run(ws) == 0


def test_a_new_token_may_be_used_to_resume_a_run_whatever_its_value(ws, capsys):
    """A throwaway one-letter token (`auth_token: x`) with a model id that contains the letter; the
    run is resumed with the token changed to `EMPTY`. The token is blanked where it is the token,
    not inside other values, so the stored model id stays as written and the resume proceeds."""
    ws.text_questions(2)
    with ScriptedEndpoint(answer_by_number) as ep:
        configure(ws, ep.url, models=[model(ep.url, auth_token="x", model="mistralai/Voxtral-Mini-3B")], pairs=[("qs", "accuracy")])
        assert run(ws) == 0
        stored = yaml.safe_load((ws.root / "runs" / "r" / "config.yaml").read_text())
        assert stored["models"][0]["model"] == "mistralai/Voxtral-Mini-3B" and stored["models"][0]["auth_token"] == "<redacted>"
        configure(ws, ep.url, models=[model(ep.url, auth_token="EMPTY", model="mistralai/Voxtral-Mini-3B")], pairs=[("qs", "accuracy")])
        assert run(ws) == 0
        assert len(ep.requests) == 2  # nothing requested again
    # The short token is written where the config repeats it: the first run said so, the second had nothing to say.
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "models[m].auth_token is shorter than 6 characters" in warnings[0], warnings


def test_a_new_token_in_the_url_or_extra_body_keeps_the_stored_answers(ws, monkeypatch):
    """A gateway that takes the key in its URL and in the body: resumed with a new key, nothing is
    requested again (the identity leaves secrets out), and the new key is what is sent."""
    ws.text_questions(2)
    with AnyPathEndpoint(answer_by_number) as ep:
        url = f"http://127.0.0.1:{ep.port}/gw/${{LALM_TOKEN}}/v1"
        entry = model(url, auth_token="${LALM_TOKEN}", generation_kwargs={"extra_body": {"api_key": "${LALM_TOKEN}"}})
        configure(ws, url, models=[entry], pairs=[("qs", "accuracy")])
        monkeypatch.setenv("LALM_TOKEN", "first-token-0123456789")
        assert run(ws, "--no-cache") == 0
        monkeypatch.setenv("LALM_TOKEN", "second-token-9876543210")
        ws.text_questions(3)  # one more sample, so the new key is seen on the wire
        assert run(ws, "--no-cache") == 0
        assert len(ep.requests) == 3
        assert "/gw/second-token-9876543210/v1/" in ep.requests[-1].path and ep.requests[-1].body["api_key"] == "second-token-9876543210"


def test_a_replica_group_declared_by_repeated_names_resumes_and_its_replicas_may_be_listed_in_any_order(ws, capsys):
    ws.text_questions(6)
    with ScriptedEndpoint(answer_by_number) as one, ScriptedEndpoint(answer_by_number) as two, ScriptedEndpoint(answer_by_number) as three:
        replicas = [model(one.url), model(two.url)]
        configure(ws, one.url, models=replicas, pairs=[("qs", "accuracy")])
        assert run(ws) == 0
        configure(ws, one.url, models=replicas[::-1], pairs=[("qs", "accuracy")])
        assert run(ws) == 0
        assert len(one.requests) + len(two.requests) == 6   # every stored answer reused
        configure(ws, one.url, models=[*replicas, model(three.url)], pairs=[("qs", "accuracy")])
        capsys.readouterr()
        assert run(ws) == 2   # a third replica is another group of servers: another evaluation
    assert "models[m]: " in capsys.readouterr().err


def test_a_new_launch_command_is_a_new_model_behind_the_same_url(ws, capsys):
    """The command is often all a config says of the weights: a run started with one checkpoint is not
    continued with another's launch (nor are its answers reused when the change is allowed)."""
    ws.text_questions(3)
    server = REPO / "tests" / "support" / "slow_server.py"

    def checkpoint(step: str) -> None:
        entry = {**model("http://127.0.0.1:{port}/v1"), "launch": f"{sys.executable} {server} --port {{port}} --delay 0 # /ckpt/{step}"}
        ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))

    checkpoint("step-1000")
    assert run(ws) in (0, 3)
    checkpoint("step-2000")
    capsys.readouterr()
    assert run(ws) == 2
    assert "models[m].launch:" in capsys.readouterr().err
    assert run(ws, "--allow-config-change") in (0, 3)
    assert "Reused 3" not in capsys.readouterr().err     # step-2000 answered every sample itself
    assert all(r["error"] is None for r in ws.records("qs", "m", "r"))
