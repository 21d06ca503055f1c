"""Model identity and replica groups: different names are different models whatever their model id;
replicas are declared (a url list, `replicas: N`, entries repeating a name) and serve one model from
one queue; a dead or broken replica's work goes to the others; `replicas: N` launches N servers."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from urllib.parse import urlsplit

import pytest
import yaml

from lalmeval.errors import UserError
from tests.support.endpoint import ForwardingProxy, Reply, ScriptedEndpoint, chat_payload
from tests.support.ports import free_port_pair
from tests.support.workspace import REPO, model


def questions(ws, count):
    rows = [{"id": f"q{i}", "question": f"question w{i}", "reference": f"answer w{i}"} for i in range(count)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})


def answer(seen, n):
    return f"answer {seen.text.split()[-1]}"


def replica(url, name="m", **settings):
    """An entry of model 'm' (id `shared`): entries repeating a name are the replicas of one model."""
    return {**model(url, name, **settings), "model": "shared"}


def test_a_faster_replica_takes_most_of_the_work_and_scores_are_reported_once(ws):
    questions(ws, 96)
    with ScriptedEndpoint(answer, latency=0.04) as fast, ScriptedEndpoint(answer, latency=0.12) as slow:
        ws.config([replica(fast.url, batch_size=4), replica(slow.url, batch_size=4)], [["qs", "accuracy"]])
        result = ws.run()
        served = len(fast.requests), len(slow.requests)
    assert sum(served) == 96 and served[0] / 96 >= 0.65, served
    assert [(s.model, s.num_samples, s.num_failed, s.score) for s in result.scores] == [("m", 96, 0, 100.0)]
    replicas = Counter(r["extra"]["replica"] for r in ws.records("qs", "m"))
    assert replicas == {fast.url: served[0], slow.url: served[1]}


def checkpoint(reply_for_question):
    """A server answering every question with `reply_for_question(n)`: one checkpoint of a model."""
    return lambda seen, n: reply_for_question(seen.text.split()[-1])


def test_two_checkpoints_served_under_one_model_id_are_two_models_with_their_own_answers(ws, capsys):
    """Two servers started with `--served-model-name model`: a good and a bad checkpoint. Entries with
    different names are different models: two rows, each scored on its own server's answers only."""
    questions(ws, 12)
    with ScriptedEndpoint(checkpoint(lambda w: f"answer {w}")) as good, ScriptedEndpoint(checkpoint(lambda w: "no idea")) as bad:
        ws.config([{**model(good.url, "step-1000"), "model": "model"}, {**model(bad.url, "step-2000"), "model": "model"}],
                  [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        from lalmeval.cli.commands import main

        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t", "--no-cache"])
        served = len(good.requests), len(bad.requests)
    out = capsys.readouterr().out
    assert served == (12, 12) and code == 0
    scores = {s["model"]: s["score"] for s in json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"]}
    assert scores == {"step-1000": 100.0, "step-2000": 0.0}
    assert {r["prediction"] for r in ws.records("qs", "step-2000")} == {"no idea"}
    assert "Replicas" not in out and "pooled" not in out   # nothing merged, nothing to say


def test_a_model_reached_directly_and_through_a_proxy_is_two_models(ws):
    """One server, reached at its own URL and through a forwarding proxy (a gateway in front of it):
    two names, the same model id, two rows; each request reaches the server once."""
    questions(ws, 6)
    with ScriptedEndpoint(answer) as server, ForwardingProxy(server.url) as proxy:
        ws.config([{**model(server.url, "direct"), "model": "shared"}, {**model(proxy.url, "via-proxy"), "model": "shared"}],
                  [["qs", "accuracy"]])
        result = ws.run()
        forwarded = proxy.forwarded
        reached = len(server.requests)
    assert sorted((s.model, s.num_samples, s.score) for s in result.scores) == [("direct", 6, 100.0), ("via-proxy", 6, 100.0)]
    assert (forwarded, reached) == (6, 12)
    assert all("extra" not in r or "replica" not in r["extra"] for r in ws.records("qs", "via-proxy"))


LITELLM = os.environ.get("LALMEVAL_LITELLM") or shutil.which("litellm")


@pytest.mark.skipif(not LITELLM, reason="needs a LiteLLM proxy: pip install 'litellm[proxy]' (about 700 MB) or set LALMEVAL_LITELLM")
def test_a_model_reached_directly_and_through_a_real_litellm_proxy_is_two_models(ws):
    """The same as above through LiteLLM's own proxy (`litellm --config`), started offline on a free port."""
    questions(ws, 6)
    port = free_port_pair()
    with ScriptedEndpoint(answer) as server:
        (ws.root / "litellm.yaml").write_text(yaml.safe_dump({"model_list": [{"model_name": "shared", "litellm_params": {
            "model": "openai/shared", "api_base": server.url, "api_key": "upstream-key-0123456789"}}]}))
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
        proxy = subprocess.Popen([LITELLM, "--config", str(ws.root / "litellm.yaml"), "--host", "127.0.0.1", "--port", str(port)],
                                 cwd=ws.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            ws.config([{**model(server.url, "direct"), "model": "shared"},
                       {**model(f"http://127.0.0.1:{port}/v1", "via-litellm"), "model": "shared", "launch_timeout": 120}],
                      [["qs", "accuracy"]])
            wait_until_answering(f"http://127.0.0.1:{port}/health/liveliness", proxy)
            result = ws.run()
        finally:
            os.killpg(proxy.pid, signal.SIGTERM)
            proxy.wait(30)
        reached = len(server.requests)
    assert sorted((s.model, s.num_samples, s.score) for s in result.scores) == [("direct", 6, 100.0), ("via-litellm", 6, 100.0)]
    assert reached == 12


def wait_until_answering(url, proc, limit=120.0):
    import time
    import urllib.request

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the proxy exited"
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {limit:g}s")


def test_a_merged_model_says_so_in_the_score_table_and_report(ws):
    questions(ws, 8)
    with ScriptedEndpoint(answer) as one, ScriptedEndpoint(answer) as two:
        ws.config([replica([one.url, two.url])], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        from lalmeval.reports.scores import score_table

        result = ws.run()
    table = score_table(result.scores, [])
    assert "│ Replicas │" in table.splitlines()[1] and f"m: one model served by 2 replicas whose answers are pooled into one score: {one.url}, {two.url}" in table
    html = (ws.root / "runs" / "t" / "report.html").read_text()
    assert "<th class=\"num\">Replicas</th>" in html and "served by 2 replicas" in html
    final = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())
    assert final["scores"][0]["details"]["replicas"] == [one.url, two.url]


def test_a_replica_that_dies_mid_run_leaves_its_work_to_the_others_and_no_sample_fails(ws, capsys):
    questions(ws, 60)
    with ScriptedEndpoint(answer, latency=0.03) as alive:
        def dying(seen, n):
            if n == 8:
                doomed.die()  # crashes with requests in flight
            return Reply(payload=chat_payload(answer(seen, n)), delay=0.05)

        with ScriptedEndpoint(dying) as doomed:
            ws.config([replica(alive.url, batch_size=4, retry_attempts=1), replica(doomed.url, batch_size=4, retry_attempts=1)],
                      [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
            from lalmeval.cli.commands import main

            code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
    score = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]
    assert (score["num_samples"], score["num_failed"], score["score"]) == (60, 0, 100.0)
    err = capsys.readouterr().err
    assert f"endpoint of model 'm ({doomed.url})' is down" in err
    assert code == 0


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_replicas_n_launches_n_servers_from_one_command_and_stops_them_all(ws):
    questions(ws, 24)
    server = REPO / "tests" / "support" / "slow_server.py"
    entry = {**model("http://127.0.0.1:{port}/v1", "m", batch_size=2), "replicas": 2, "launch_timeout": 60,
             "launch": f"{sys.executable} {server} --port {{port}} --delay 0.05 # replica {{replica}}"}
    rows = [{"id": f"q{i}", "question": f"question w{i}", "reference": f"echo: w{i}"} for i in range(24)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    config = ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "r", "--no-cache"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    logs = sorted(p.name for p in (ws.root / "runs" / "r").glob("launch_*.log"))
    assert logs == ["launch_m-replica0.log", "launch_m-replica1.log"]
    served = Counter(json.loads(x)["extra"]["replica"] for x in (ws.root / "runs" / "r" / "records" / "qs__m.jsonl").read_text().splitlines())
    ports = {urlsplit(url).port for url in served}
    assert len(ports) == 2 and sum(served.values()) == 24  # {port}: a free port of its own for each replica
    assert all(port_is_free(port) for port in ports)


@pytest.mark.parametrize("setting,value", [("temperature", 0.7), ("model", "other-id"), ("inference_type", "transcription"),
                                           ("max_tokens", 64)])
def test_entries_sharing_a_name_must_agree_on_what_decides_a_reply(ws, setting, value):
    questions(ws, 2)
    ws.config([replica("http://127.0.0.1:9/v1"), {**replica("http://127.0.0.1:10/v1"), setting: value}], [["qs", "accuracy"]])
    with pytest.raises(UserError, match=rf"^models: the entries named 'm' are replicas of one model, but their {setting} differs .*"
                                        r"or different names to evaluate them as different models"):
        ws.plan()


def test_one_server_listed_twice_as_a_replica_is_refused(ws):
    questions(ws, 2)
    ws.config([replica("http://127.0.0.1:9/v1"), replica("http://127.0.0.1:9/v1/")], [["qs", "accuracy"]])
    with pytest.raises(UserError, match=r"^model 'm': http://127.0.0.1:9/v1 is listed twice as one of its replicas"):
        ws.plan()


def test_replicas_need_their_own_ports(ws):
    questions(ws, 2)
    entry = {**model("http://127.0.0.1:8100/v1", "m"), "replicas": 2, "launch": "serve --port 8100"}
    ws.config([entry], [["qs", "accuracy"]])
    with pytest.raises(UserError, match=r"the launch command must use \{port\}"):
        ws.plan()


def test_a_prompt_rule_and_an_override_naming_the_model_reach_every_replica(ws):
    questions(ws, 12)
    with ScriptedEndpoint(answer, latency=0.05) as one, ScriptedEndpoint(answer, latency=0.05) as two:
        ws.config([replica(one.url, batch_size=1), replica(two.url, batch_size=1)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"),
                  prompt_rules=[{"model": "m", "instruction": "Answer in French."}], generation_overrides=[{"model": "m", "top_p": 0.5}])
        ws.run()
        sent = one.requests + two.requests
    assert len(sent) == 12 and one.requests and two.requests
    assert all(s.text.startswith("Answer in French.") and s.body["top_p"] == 0.5 for s in sent)
