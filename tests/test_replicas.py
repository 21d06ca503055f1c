"""Replica groups: entries sharing a model id serve it together from one queue; a dead replica's
work goes to the others; `replicas: N` launches N servers from one command."""

import json
import socket
import subprocess
import sys
from collections import Counter
from urllib.parse import urlsplit

import pytest

from lalmeval.errors import UserError
from tests.support.endpoint import Reply, ScriptedEndpoint, chat_payload
from tests.support.workspace import REPO, model


def questions(ws, count):
    rows = [{"id": f"q{i}", "question": f"question w{i}", "reference": f"answer w{i}"} for i in range(count)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})


def answer(seen, n):
    return f"answer {seen.text.split()[-1]}"


def replica(url, name, **settings):
    return {**model(url, name, **settings), "model": "shared"}


def test_a_faster_replica_takes_most_of_the_work_and_scores_are_reported_once(ws):
    questions(ws, 96)
    with ScriptedEndpoint(answer, latency=0.04) as fast, ScriptedEndpoint(answer, latency=0.12) as slow:
        ws.config([replica(fast.url, "fast", batch_size=4), replica(slow.url, "slow", batch_size=4)], [["qs", "accuracy"]])
        result = ws.run()
        served = len(fast.requests), len(slow.requests)
    assert sum(served) == 96 and served[0] / 96 >= 0.65, served
    assert [(s.model, s.num_samples, s.num_failed, s.score) for s in result.scores] == [("fast", 96, 0, 100.0)]
    replicas = Counter(r["extra"]["replica"] for r in ws.records("qs", "fast"))
    assert replicas == {fast.url: served[0], slow.url: served[1]}


def test_a_replica_that_dies_mid_run_leaves_its_work_to_the_others_and_no_sample_fails(ws, capsys):
    questions(ws, 60)
    with ScriptedEndpoint(answer, latency=0.03) as alive:
        def dying(seen, n):
            if n == 8:
                doomed.die()  # crashes with requests in flight
            return Reply(payload=chat_payload(answer(seen, n)), delay=0.05)

        with ScriptedEndpoint(dying) as doomed:
            ws.config([replica(alive.url, "a", batch_size=4, retry_attempts=1), replica(doomed.url, "b", batch_size=4, retry_attempts=1)],
                      [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
            from lalmeval.cli import main

            code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
    score = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]
    assert (score["num_samples"], score["num_failed"], score["score"]) == (60, 0, 100.0)
    err = capsys.readouterr().err
    assert f"endpoint of model 'a ({doomed.url})' is down" in err
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


def test_replicas_of_one_model_must_agree_on_what_decides_a_reply(ws):
    questions(ws, 2)
    ws.config([replica("http://127.0.0.1:9/v1", "a"), replica("http://127.0.0.1:10/v1", "b", temperature=0.7)], [["qs", "accuracy"]])
    with pytest.raises(UserError, match=r"models 'a' and 'b' share model 'shared' and inference_type, so they are replicas of one model, but their temperature differs"):
        ws.plan()


def test_replicas_need_their_own_ports(ws):
    questions(ws, 2)
    entry = {**model("http://127.0.0.1:8100/v1", "m"), "replicas": 2, "launch": "serve --port 8100"}
    ws.config([entry], [["qs", "accuracy"]])
    with pytest.raises(UserError, match=r"the launch command must use \{port\}"):
        ws.plan()


def test_a_prompt_rule_for_a_replica_entry_is_refused_like_a_differing_temperature(ws):
    """Two entries serve model id `shared` (one replica group, named 'a'); a prompt rule gives entry
    'b' its own instruction. The group's prompts are built from its first entry, so the rule would
    reach no replica: it is refused at start, naming the entries, the setting and the dataset."""
    questions(ws, 4)
    ws.config([replica("http://127.0.0.1:9/v1", "a"), replica("http://127.0.0.1:10/v1", "b")], [["qs", "accuracy"]],
              prompt_rules=[{"model": "b", "instruction": "Answer in French."}])
    with pytest.raises(UserError, match=r"^models 'a' and 'b' are replicas of model 'shared' but get different prompts \(instruction\) on 'qs' "
                                        r"\(None vs 'Answer in French\.'\): check prompt_rules, or give them different `model` ids"):
        ws.plan()


@pytest.mark.parametrize("rule,setting", [({"system_prompts": ["concise"]}, "system_texts"),
                                          ({"user_prompt_add_ons": ["asr_clean_output"]}, "add_on_texts"),
                                          ({"mc_template": "mc_options_zh"}, "mc_template")])
def test_every_prompt_setting_must_agree_across_replicas(ws, rule, setting):
    questions(ws, 2)
    ws.config([replica("http://127.0.0.1:9/v1", "a"), replica("http://127.0.0.1:10/v1", "b")], [["qs", "accuracy"]],
              prompt_rules=[{"model": "b", **rule}])
    with pytest.raises(UserError, match=rf"get different prompts \({setting}\) on 'qs'"):
        ws.plan()


def test_a_prompt_rule_naming_every_replica_entry_is_applied_to_the_whole_group(ws):
    questions(ws, 4)
    with ScriptedEndpoint(answer) as one, ScriptedEndpoint(answer) as two:
        ws.config([replica(one.url, "a"), replica(two.url, "b")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"),
                  prompt_rules=[{"model": "a", "instruction": "Answer in French."}, {"model": "b", "instruction": "Answer in French."}])
        ws.run()
        texts = [s.text for s in one.requests + two.requests]
    assert len(texts) == 4 and all(t.startswith("Answer in French.") for t in texts), texts


def test_a_generation_override_for_a_replica_entry_is_refused_naming_both_override_kinds(ws):
    questions(ws, 2)
    ws.config([replica("http://127.0.0.1:9/v1", "a"), replica("http://127.0.0.1:10/v1", "b")], [["qs", "accuracy"]],
              generation_overrides=[{"model": "b", "top_p": 0.5}])
    with pytest.raises(UserError, match=r"get different generation parameters on 'qs' .*: check temperature_overrides and generation_overrides"):
        ws.plan()
