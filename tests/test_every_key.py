"""Every key has an effect or is refused: a table from each config key and runspec field to a test
that changes only that key and observes a different request, record, score or file — or a refusal.

`test_the_table_covers_every_key` walks the config schema (lalmeval/config/schema.py, recursively) and
the runspec fields (lalmeval/catalog/runspecs.py): a key without an entry fails it, so a key added later
comes with the test of its effect. Runs are real: in-process against scripted endpoints on
127.0.0.1, on small text, speech and multiple-choice sets.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pytest
import soundfile as sf
from pydantic import BaseModel

from lalmeval.catalog.runspecs import DatasetSpec
from lalmeval.config.options import RunOptions
from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from tests.support.endpoint import Reply, ScriptedEndpoint, Seen
from tests.support.ports import free_port_pair
from tests.support.workspace import DEMO, REPO, Workspace, demo_rows

# --- the walk over the schema --------------------------------------------------------------------


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _listed(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, tuple) or any(_listed(a) for a in typing.get_args(annotation))


def leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field that holds a value (not a section of fields), as a path: filters.num_samples, models[].timeout."""
    keys = []
    for name, info in model.model_fields.items():
        inner = _models_in(info.annotation)
        if not inner:
            keys.append(prefix + name)
        for sub in inner:
            keys += leaf_keys(sub, f"{prefix}{name}{'[]' if _listed(info.annotation) else ''}.")
    return keys


def all_keys() -> list[str]:
    return leaf_keys(Config) + leaf_keys(DatasetSpec, "runspec.")


# --- the lab: small datasets, scripted endpoints, one run per call -------------------------------

QS = [{"id": f"q{i}", "question": f"question {i}", "question2": f"other question {i}", "reference": f"answer {i}", "alt": f"alt {i}",
       "instr": f"Instruction {i}.", "lang": ["en", "fr", "en"][i], "group": ["g1", "g2", "g1"][i], "transcript": f"spoken words {i}"}
      for i in range(3)]
MC = [{"id": f"m{i}", "question": f"Pick the animal {i}", "options": ["cat", "dog", "cow", "bird"], "options2": ["red", "blue", "green", "grey"],
       "answer": "B", "A": "cat", "B": "dog", "C": "cow", "D": "bird"} for i in range(3)]
BASE = {
    "qs": {"hf_repo": "data/qs.jsonl", "id_column": "id", "modality": "text", "textual_input_column": "question", "audio_column": None},
    "clips": {"hf_repo": "data/clips.jsonl", "id_column": "id"},
    "mc": {"hf_repo": "data/mc.jsonl", "id_column": "id", "modality": "text", "audio_column": None, "textual_input_column": "question",
           "choices_column": "options", "target_column": "answer"},
    "many": {"hf_repo": "data/many.jsonl", "id_column": "id", "modality": "text", "textual_input_column": "question", "audio_column": None},
}


def default_reply(seen: Seen, n: int) -> str:
    found = re.search(r"question (\d+)", seen.text)
    if found:
        return f"answer {found.group(1)}"
    return "B" if "Options" in seen.text or "選項" in seen.text else "turn on the lights"


@dataclass
class Obs:
    """What one run did: the requests each endpoint got, records, scores, final_scores.json — or the refusal."""

    requests: list[Seen] = field(default_factory=list)
    judged: list[Seen] = field(default_factory=list)
    records: dict[str, list[dict]] = field(default_factory=dict)
    scores: list[Any] = field(default_factory=list)
    final: dict = field(default_factory=dict)
    error: Optional[str] = None
    stderr: str = ""
    run_dir: Optional[Path] = None

    def bodies(self, key: str) -> list[Any]:
        return [s.body.get(key) for s in self.requests if s.body is not None]

    @property
    def texts(self) -> list[str]:
        return sorted(s.text for s in self.requests)

    def score(self, dataset: str = "qs") -> Any:
        return next(s for s in self.scores if s.dataset == dataset)


class Lab:
    """A workspace with the lab's datasets and two scripted endpoints (a model, a judge)."""

    def __init__(self, ws: Workspace, endpoint: ScriptedEndpoint, judge: ScriptedEndpoint):
        self.ws, self.ep, self.judge, self.runs = ws, endpoint, judge, 0
        clips = ws.copy_demo_audio(demo_rows(4))
        ws.jsonl(QS, "data/qs.jsonl")
        ws.jsonl([{**c, "audio2": clips[3]["audio"], "question": "What is said?"} for c in clips[:3]], "data/clips.jsonl")
        ws.jsonl(MC, "data/mc.jsonl")
        ws.jsonl([{"id": f"n{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(12)], "data/many.jsonl")

    def model(self, **settings: Any) -> dict[str, Any]:
        return {"name": "m", "url": self.ep.url, "model": "scripted-m", "batch_size": 4, "timeout": 10, "retry_attempts": 0, **settings}

    def judge_properties(self, **settings: Any) -> dict[str, Any]:
        return {"judge_model": "j", "judge_api_endpoint": self.judge.url, "judge_retry_attempts": 0, "judge_timeout": 10, **settings}

    def run(self, pairs: Optional[list[list[str]]] = None, spec: Optional[dict[str, dict]] = None, model: Optional[dict] = None,
            models: Optional[list[dict]] = None, options: RunOptions = RunOptions(use_cache=False), runspecs: bool = True,
            **config: Any) -> Obs:
        from lalmeval.run.runner import run

        self.ws.runspec("lab", "sets", {name: {**base, **(spec or {}).get(name, {})} for name, base in BASE.items()})
        entries = models if models is not None else [self.model(**(model or {}))]
        data = {"dataset_metric": pairs or [["qs", "accuracy"]], "models": entries, "output_dir": "runs", **config}
        if runspecs:
            data.setdefault("runspec_dirs", ["runspecs"])
        path = self.ws.root / "config.yaml"
        path.write_text(json.dumps(data))
        self.runs += 1
        start, judged, err = len(self.ep.requests), len(self.judge.requests), io.StringIO()
        obs = Obs()
        with contextlib.redirect_stderr(err):  # the lab fixture works from the workspace: relative paths land there
            try:
                plan = self.ws.plan()
                out = Path(plan.config.output_dir)
                result = run(plan, out.resolve(), f"r{self.runs}", quiet=True, options=options)
                obs.run_dir = out.resolve() / f"r{self.runs}"
                obs.scores = result.scores
                obs.records = {f.name.split("__")[0]: [json.loads(x) for x in f.read_text().splitlines()]
                               for f in (obs.run_dir / "records").glob("*.jsonl")}
                final = obs.run_dir / "final_scores.json"
                obs.final = json.loads(final.read_text()) if final.is_file() else {}
            except UserError as exc:
                obs.error = str(exc)
        obs.requests, obs.judged, obs.stderr = self.ep.requests[start:], self.judge.requests[judged:], err.getvalue()
        return obs


@contextlib.contextmanager
def extra_dataset(name: str, spec: dict):
    """A dataset of the lab's runspec for one test."""
    BASE[name] = spec
    try:
        yield
    finally:
        del BASE[name]


@pytest.fixture(scope="module")
def endpoints():
    with ScriptedEndpoint(default_reply) as model_ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge_ep:
        yield model_ep, judge_ep


@pytest.fixture
def lab(ws, endpoints, monkeypatch):
    model_ep, judge_ep = endpoints
    monkeypatch.chdir(ws.root)
    yield Lab(ws, model_ep, judge_ep)
    model_ep.handler, judge_ep.handler = default_reply, (lambda seen, n: "Rating: 1")


def other_endpoint(handler: Callable = default_reply, **kw: Any) -> ScriptedEndpoint:
    return ScriptedEndpoint(handler, **kw)


# --- effects: generation settings, at each of their three layers ---------------------------------

GENERATION = {"temperature": 0.5, "top_p": 0.5, "top_k": 5, "min_p": 0.1, "seed": 7, "max_tokens": 33, "stop": ["END"],
              "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.2, "extra_body": {"skip_special_tokens": False}}


def sent(obs: Obs, key: str) -> list[Any]:
    """What the requests carried for a generation setting (extra_body's keys stand at the top level)."""
    if key == "extra_body":
        return obs.bodies("skip_special_tokens")
    return obs.bodies(key)


def generation_effect(layer: str, key: str) -> Callable[[Lab], None]:
    value = GENERATION[key]
    settings = {
        "models[].generation_kwargs": lambda: {"model": {"generation_kwargs": {key: value}}},
        "generation_overrides[]": lambda: {"generation_overrides": [{"task": "qs", key: value}]},
        "runspec.generation_kwargs": lambda: {"spec": {"qs": {"generation_kwargs": {key: value}}}},
    }[layer]

    def effect(lab: Lab) -> None:
        before, after = lab.run(), lab.run(**settings())
        expected = value if key != "extra_body" else False
        assert sent(before, key) != sent(after, key) and set(map(json.dumps, sent(after, key))) == {json.dumps(expected)}
    return effect


# --- effects: config keys ------------------------------------------------------------------------


def e_dataset_metric(lab: Lab) -> None:
    assert [s.metric for s in lab.run(pairs=[["qs", "accuracy"]]).scores] == ["accuracy"]
    assert [s.metric for s in lab.run(pairs=[["qs", "bleu"]]).scores] == ["bleu"]


def e_num_samples(lab: Lab) -> None:
    assert len(lab.run().requests) == 3 and len(lab.run(filters={"num_samples": 2}).requests) == 2


def e_shuffle(lab: Lab) -> None:
    first = lab.run(pairs=[["many", "accuracy"]], filters={"num_samples": 3}).texts
    drawn = lab.run(pairs=[["many", "accuracy"]], filters={"num_samples": 3, "shuffle": True}).texts
    assert first == ["question 0", "question 1", "question 2"] and drawn != first and len(drawn) == 3


def e_length_filter(lab: Lab) -> None:
    import soundfile as sf

    lengths = sorted(sf.info(str(lab.ws.root / "data" / r["audio"])).duration for r in lab.ws.copy_demo_audio(demo_rows(3)))
    kept = lab.run(pairs=[["clips", "word_error_rate"]], filters={"length_filter": [lengths[1] - 0.01, lengths[2] + 0.01]})
    assert len(lab.run(pairs=[["clips", "word_error_rate"]]).requests) == 3 and len(kept.requests) == 2


def e_language(lab: Lab) -> None:
    spec = {"mc": {"language": "french"}}
    both = lab.run(pairs=[["lab", "accuracy"]], spec=spec)
    english = lab.run(pairs=[["lab", "accuracy"]], spec=spec, filters={"language": "en"})
    assert "mc" in {s.dataset for s in both.scores} and "mc" not in {s.dataset for s in english.scores}


def e_accented(lab: Lab) -> None:
    spec = {"mc": {"accented": True}}
    assert "mc" in {s.dataset for s in lab.run(pairs=[["lab", "accuracy"]], spec=spec).scores}
    assert "mc" not in {s.dataset for s in lab.run(pairs=[["lab", "accuracy"]], spec=spec, filters={"accented": False}).scores}


def e_user_prompt_add_ons(lab: Lab) -> None:
    added = lab.run(filters={"user_prompt_add_ons": ["asr_clean_output"]})
    assert all(s.text == f"question {s.text.split()[1]}" for s in lab.run().requests)
    assert all(len(s.text) > len("question 0") for s in added.requests)


def e_system_prompts(lab: Lab) -> None:
    assert {s.system for s in lab.run().requests} == {None}
    assert None not in {s.system for s in lab.run(filters={"system_prompts": ["concise"]}).requests}


def e_aggregate(lab: Lab) -> None:
    assert lab.run().final["aggregates"] == []
    (row,) = lab.run(aggregate=[["accuracy", ["qs"]]]).final["aggregates"]
    assert row["names"] == ["qs"] and row["weighted_mean"] == 100.0


def two_models(lab: Lab) -> list[dict]:
    return [lab.model(), lab.model(name="m2", model="scripted-m2")]


def temperatures_of(obs: Obs, model_id: str) -> set:
    return {s.body["temperature"] for s in obs.requests if s.body["model"] == model_id}


def e_temperature_overrides_model(lab: Lab) -> None:
    to_m = lab.run(models=two_models(lab), temperature_overrides=[{"model": "m", "temperature": 0.5}])
    to_m2 = lab.run(models=two_models(lab), temperature_overrides=[{"model": "m2", "temperature": 0.5}])
    assert temperatures_of(to_m, "scripted-m") == {0.5} and temperatures_of(to_m2, "scripted-m") == {0.0}


def e_temperature_overrides_task(lab: Lab) -> None:
    assert set(lab.run(temperature_overrides=[{"task": "qs", "temperature": 0.5}]).bodies("temperature")) == {0.5}
    assert set(lab.run(temperature_overrides=[{"task": "mc", "temperature": 0.5}]).bodies("temperature")) == {0.0}


def e_temperature_overrides_temperature(lab: Lab) -> None:
    assert set(lab.run(temperature_overrides=[{"task": "qs", "temperature": 0.3}]).bodies("temperature")) == {0.3}
    assert set(lab.run(temperature_overrides=[{"task": "qs", "temperature": 0.6}]).bodies("temperature")) == {0.6}


def e_generation_overrides_model(lab: Lab) -> None:
    to_m = lab.run(models=two_models(lab), generation_overrides=[{"model": "m", "top_p": 0.5}])
    to_m2 = lab.run(models=two_models(lab), generation_overrides=[{"model": "m2", "top_p": 0.5}])
    assert {s.body.get("top_p") for s in to_m.requests if s.body["model"] == "scripted-m"} == {0.5}
    assert {s.body.get("top_p") for s in to_m2.requests if s.body["model"] == "scripted-m"} == {None}


def e_generation_overrides_task(lab: Lab) -> None:
    assert set(lab.run(generation_overrides=[{"task": "qs", "top_p": 0.5}]).bodies("top_p")) == {0.5}
    assert set(lab.run(generation_overrides=[{"task": "mc", "top_p": 0.5}]).bodies("top_p")) == {None}


def e_prompt_rules_model(lab: Lab) -> None:
    to_m = lab.run(models=two_models(lab), prompt_rules=[{"model": "m", "system_prompts": ["concise"]}])
    to_m2 = lab.run(models=two_models(lab), prompt_rules=[{"model": "m2", "system_prompts": ["concise"]}])
    assert None not in {s.system for s in to_m.requests if s.body["model"] == "scripted-m"}
    assert {s.system for s in to_m2.requests if s.body["model"] == "scripted-m"} == {None}


def e_prompt_rules_task(lab: Lab) -> None:
    assert None not in {s.system for s in lab.run(prompt_rules=[{"task": "qs", "system_prompts": ["concise"]}]).requests}
    assert {s.system for s in lab.run(prompt_rules=[{"task": "mc", "system_prompts": ["concise"]}]).requests} == {None}


def e_prompt_rules_language(lab: Lab) -> None:
    assert None not in {s.system for s in lab.run(prompt_rules=[{"language": "en", "system_prompts": ["concise"]}]).requests}
    assert {s.system for s in lab.run(prompt_rules=[{"language": "fr", "system_prompts": ["concise"]}]).requests} == {None}


def e_prompt_rules_system_prompts(lab: Lab) -> None:
    concise = {s.system for s in lab.run(prompt_rules=[{"task": "qs", "system_prompts": ["concise"]}]).requests}
    expert = {s.system for s in lab.run(prompt_rules=[{"task": "qs", "system_prompts": ["audio_expert"]}]).requests}
    assert len(concise) == len(expert) == 1 and concise != expert


def e_prompt_rules_user_prompt_add_ons(lab: Lab) -> None:
    added = lab.run(prompt_rules=[{"task": "qs", "user_prompt_add_ons": ["asr_clean_output"]}]).texts
    assert added != lab.run().texts and all(t.startswith("question") for t in added)


def e_prompt_rules_instruction(lab: Lab) -> None:
    told = lab.run(prompt_rules=[{"task": "qs", "instruction": "Answer the question."}]).texts
    assert told == [f"Answer the question.\nquestion {i}" for i in range(3)]


def e_prompt_rules_mc_template(lab: Lab) -> None:
    zh = lab.run(pairs=[["mc", "accuracy"]], prompt_rules=[{"task": "mc", "mc_template": "mc_options_zh"}])
    assert all("選項" in t for t in zh.texts) and not any("選項" in t for t in lab.run(pairs=[["mc", "accuracy"]]).texts)


def option_orders(obs: Obs) -> list[tuple]:
    return [tuple(re.findall(r"^[A-D]\. (.*)$", t, re.M)) for t in obs.texts]


def e_shuffle_options(lab: Lab) -> None:
    plain, shuffled = lab.run(pairs=[["mc", "accuracy"]]), lab.run(pairs=[["mc", "accuracy"]], shuffle_options=True)
    assert set(option_orders(plain)) == {("cat", "dog", "cow", "bird")} and option_orders(shuffled) != option_orders(plain)


def e_repeat_runs(lab: Lab) -> None:
    assert len(lab.run().requests) == 3 and len(lab.run(repeat_runs=2).requests) == 6


def e_name(lab: Lab) -> None:
    assert [s.model for s in lab.run(model={"name": "renamed"}).scores] == ["renamed"]


def e_inference_type(lab: Lab) -> None:
    chat = lab.run(pairs=[["clips", "word_error_rate"]])
    transcribed = lab.run(pairs=[["clips", "word_error_rate"]], model={"inference_type": "transcription"})
    assert {s.path for s in chat.requests} == {"/v1/chat/completions"} and {s.path for s in transcribed.requests} == {"/v1/audio/transcriptions"}


def e_url(lab: Lab) -> None:
    with other_endpoint() as elsewhere:
        obs = lab.run(model={"url": elsewhere.url})
        assert obs.requests == [] and len(elsewhere.requests) == 3


def e_model(lab: Lab) -> None:
    assert set(lab.run(model={"model": "another-id"}).bodies("model")) == {"another-id"}


def e_auth_token(lab: Lab) -> None:
    assert {s.headers.get("Authorization") for s in lab.run().requests} == {None}
    assert {s.headers.get("Authorization") for s in lab.run(model={"auth_token": "secret-token-1"}).requests} == {"Bearer secret-token-1"}


def e_api_version(lab: Lab) -> None:
    token = {"auth_token": "secret-token-1"}
    bearer, azure = lab.run(model=token), lab.run(model={**token, "api_version": "2024-06-01"})
    assert {(s.headers.get("api-key"), s.query.get("api-version")) for s in bearer.requests} == {(None, None)}
    assert {(s.headers.get("api-key"), s.query.get("api-version")) for s in azure.requests} == {("secret-token-1", "2024-06-01")}


def e_delay(lab: Lab) -> None:
    spaced = lab.run(model={"delay": 1000})
    starts = sorted(s.started for s in spaced.requests)
    # Requests start a second apart; they arrive with the jitter of the connections in between: half of it is a safe bound.
    assert len(starts) == 3 and all(b - a >= 0.5 for a, b in zip(starts, starts[1:]))


def flaky_first_attempt(lab: Lab) -> None:
    tried: set[str] = set()

    def handler(seen: Seen, n: int):
        if seen.text not in tried:
            tried.add(seen.text)
            return Reply(503, {"error": {"message": "busy"}})
        return default_reply(seen, n)
    lab.ep.handler = handler
    return tried


def e_retry_attempts(lab: Lab) -> None:
    tried = flaky_first_attempt(lab)
    once = lab.run(model={"retry_attempts": 0})
    tried.clear()
    again = lab.run(model={"retry_attempts": 1})
    assert {r["error"].split(":")[0] for r in once.records["qs"]} == {"HTTP 503"} and {r["error"] for r in again.records["qs"]} == {None}


def e_timeout(lab: Lab) -> None:
    lab.ep.handler = lambda seen, n: Reply(payload={"choices": [{"message": {"content": "late"}}]}, delay=1.0)
    assert {r["error"] for r in lab.run(model={"timeout": 5}).records["qs"]} == {None}
    assert {r["error"] for r in lab.run(model={"timeout": 0.3}).records["qs"]} == {"timeout after 0.3s"}


def e_batch_size(lab: Lab) -> None:
    lab.ep.handler = lambda seen, n: Reply(payload={"choices": [{"message": {"content": "x"}}]}, delay=0.3)
    assert max(s.concurrent for s in lab.run(model={"batch_size": 1}).requests) == 1
    assert max(s.concurrent for s in lab.run(model={"batch_size": 3}).requests) > 1


def e_chunk_size(lab: Lab) -> None:
    whole, cut = lab.run(pairs=[["clips", "word_error_rate"]]), lab.run(pairs=[["clips", "word_error_rate"]], model={"chunk_size": 1})
    assert len(whole.requests) == 3 and len(cut.requests) > 3 and max(x for s in cut.requests for x in s.audio_seconds) <= 1.0001


def e_long_audio(lab: Lab) -> None:
    chunked = lab.run(pairs=[["clips", "word_error_rate"]], model={"chunk_size": 1})
    truncated = lab.run(pairs=[["clips", "word_error_rate"]], model={"chunk_size": 1, "long_audio": "truncate"})
    assert len(chunked.requests) > 3 and len(truncated.requests) == 3


def e_replicas(lab: Lab) -> None:
    port = free_port_pair()
    with other_endpoint(port=port) as first, other_endpoint(lambda s, n: Reply(payload={"choices": [{"message": {"content": "x"}}]}, delay=0.2),
                                                            port=port + 1) as second:
        one = lab.run(model={"url": first.url, "batch_size": 1})
        both = lab.run(model={"url": first.url, "batch_size": 1, "replicas": 2}, pairs=[["many", "accuracy"]])
        assert len(second.requests) > 0 and len(first.requests) == 3 + len(both.records["many"]) - len(second.requests)
    assert {r["extra"].get("replica") for r in both.records["many"]} == {first.url, second.url} and len(one.records["qs"]) == 3


def launched(port: int, wait: float = 0) -> str:
    server = REPO / "tests" / "support" / "slow_server.py"
    return f"sleep {wait}; exec {sys.executable} {server} --port {port} --delay 0"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def e_launch(lab: Lab) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    down = lab.run(model={"url": url})
    up = lab.run(model={"url": url, "launch": launched(port), "launch_timeout": 60})
    assert {r["error"] is not None for r in down.records["qs"]} == {True}
    assert {r["error"] for r in up.records["qs"]} == {None} and (up.run_dir / "launch_m.log").is_file()


def e_launch_timeout(lab: Lab) -> None:
    port = free_port()
    slow = {"url": f"http://127.0.0.1:{port}/v1", "launch": launched(port, wait=3)}
    assert "did not answer" in (lab.run(model={**slow, "launch_timeout": 1}).error or "")
    assert {r["error"] for r in lab.run(model={**slow, "launch_timeout": 60}).records["qs"]} == {None}


def e_model_temperature(lab: Lab) -> None:
    assert set(lab.run().bodies("temperature")) == {0.0} and set(lab.run(model={"temperature": 0.9}).bodies("temperature")) == {0.9}


def e_model_max_tokens(lab: Lab) -> None:
    assert set(lab.run().bodies("max_tokens")) == {None} and set(lab.run(model={"max_tokens": 12}).bodies("max_tokens")) == {12}


def part_types(obs: Obs) -> set[str]:
    return {p["type"] for s in obs.requests for m in s.body["messages"] for p in (m["content"] if isinstance(m["content"], list) else [])}


def e_audio_format(lab: Lab) -> None:
    assert "input_audio" in part_types(lab.run(pairs=[["clips", "word_error_rate"]]))
    assert "audio_url" in part_types(lab.run(pairs=[["clips", "word_error_rate"]], model={"audio_format": "audio_url"}))


def e_max_reply_mb(lab: Lab) -> None:
    lab.ep.handler = lambda seen, n: "x" * 1_500_000
    assert {r["error"] for r in lab.run().records["qs"]} == {None}
    assert {r["error"] for r in lab.run(model={"max_reply_mb": 1}).records["qs"]} == {"reply too large: more than 1 MB (max_reply_mb)"}


def self_signed(tmp_path: Path):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a self-signed certificate")
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def e_verify_ssl(lab: Lab) -> None:
    with other_endpoint(ssl_context=self_signed(lab.ws.root)) as secure:
        strict, lenient = lab.run(model={"url": secure.url}), lab.run(model={"url": secure.url, "verify_ssl": False})
    assert all("certificate not trusted" in r["error"] for r in strict.records["qs"]) and {r["error"] for r in lenient.records["qs"]} == {None}


def e_runspec_dirs(lab: Lab) -> None:
    assert "unknown dataset, task type or category 'qs'" in (lab.run(runspecs=False).error or "")
    assert lab.run().error is None


def e_dataset_paths(lab: Lab) -> None:
    lab.ws.jsonl([{**q, "question": f"question {i + 5}"} for i, q in enumerate(QS)], "elsewhere/qs.jsonl")
    assert lab.run(dataset_paths={"qs": "elsewhere/qs.jsonl"}).texts == ["question 5", "question 6", "question 7"]


def e_datasets(lab: Lab) -> None:
    declared = {"inline": {**BASE["qs"], "language": "english", "hf_repo": "data/qs.jsonl"}}   # relative to the config file
    assert "unknown dataset, task type or category 'inline'" in (lab.run(pairs=[["inline", "accuracy"]]).error or "")
    assert lab.run(pairs=[["inline", "accuracy"]], datasets=declared).texts == ["question 0", "question 1", "question 2"]


def e_dataset_root(lab: Lab) -> None:
    rows = [{"index": 0, "audio_path": "Series/clip.wav", "question": "", "answer": "x", "subset": "s"}]
    (lab.ws.root / "kimi" / "Series").mkdir(parents=True)
    shutil.copy(DEMO / demo_rows(1)[0]["audio"], lab.ws.root / "kimi" / "Series" / "clip.wav")
    lab.ws.jsonl(rows, "kimi/Series/kimi_set.jsonl")
    with extra_dataset("kimi", {"hf_repo": "nowhere/Series/kimi_set.jsonl", "format": "kimi"}):
        assert "data file not found" in lab.run(pairs=[["kimi", "word_error_rate"]]).error
        assert len(lab.run(pairs=[["kimi", "word_error_rate"]], dataset_root="kimi").requests) == 1


def e_prompts_file(lab: Lab) -> None:
    (lab.ws.root / "prompts.yaml").write_text(json.dumps({"user_prompt_add_ons": {"asr_clean_output": "ADD-ON FROM THE FILE"}}))
    shipped = lab.run(filters={"user_prompt_add_ons": ["asr_clean_output"]}).texts
    own = lab.run(filters={"user_prompt_add_ons": ["asr_clean_output"]}, prompts_file="prompts.yaml").texts
    assert shipped != own and all(t.endswith("ADD-ON FROM THE FILE") for t in own)


def e_streaming(lab: Lab) -> None:
    """A hub-layout folder whose second shard is broken: read whole it cannot be opened (nothing is
    sent); streamed, the rows before the break are answered."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = lab.ws.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    rows = [{**QS[0], "id": f"q{i}", "question": f"question {i}"} for i in range(70)]  # more than one read batch before the break
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000.parquet")
    (folder / "test-00001.parquet").write_bytes(b"PAR1 not parquet")
    spec = {"qs": {"hf_repo": "data/hubstyle"}}
    assert lab.run(spec=spec).requests == [] and len(lab.run(spec=spec, streaming=True).requests) > 0


def e_seed(lab: Lab) -> None:
    drawn = {seed: lab.run(pairs=[["many", "accuracy"]], seed=seed, filters={"num_samples": 3, "shuffle": True}).texts for seed in (0, 1)}
    assert drawn[0] != drawn[1]


def e_bootstrap_resamples(lab: Lab) -> None:
    assert lab.run().score().ci95 is not None and lab.run(bootstrap_resamples=0).score().ci95 is None


def e_output_dir(lab: Lab) -> None:
    assert lab.run(output_dir="elsewhere/out").run_dir == lab.ws.root / "elsewhere" / "out" / f"r{lab.runs}"


def e_cache(lab: Lab) -> None:
    lab.run(options=RunOptions())
    assert len(lab.run(options=RunOptions()).requests) == 3   # off by default: every run asks the server
    lab.run(options=RunOptions(), cache=True)
    assert len(lab.run(options=RunOptions(), cache=True).requests) == 0


def e_max_failure_rate(lab: Lab) -> None:
    lab.ep.handler = lambda seen, n: Reply(status=400, payload={"error": {"message": "bad"}}) if n % 2 else default_reply(seen, n)
    rows = [{"id": f"f{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(40)]
    lab.ws.jsonl(rows, "data/forty.jsonl")
    with extra_dataset("forty", {**BASE["many"], "hf_repo": "data/forty.jsonl"}):
        whole = lab.run(pairs=[["forty", "accuracy"]], model={"batch_size": 1})
        stopped = lab.run(pairs=[["forty", "accuracy"]], model={"batch_size": 1}, max_failure_rate=0.2)
    assert len(whole.requests) == 40 and not whole.final["stopped"]
    assert len(stopped.requests) < 40 and stopped.final["stopped"].startswith("stopped after")


def e_allowed_data_dirs(lab: Lab) -> None:
    elsewhere = lab.ws.root / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    rows = []
    for row in demo_rows(2):
        shutil.copy(DEMO / row["audio"], elsewhere / Path(row["audio"]).name)
        rows.append({**row, "audio": str(elsewhere / Path(row["audio"]).name)})
    lab.ws.jsonl(rows, "data/outside.jsonl")
    with extra_dataset("outside", {**BASE["clips"], "hf_repo": "data/outside.jsonl"}):
        refused = lab.run(pairs=[["outside", "word_error_rate"]])
        allowed = lab.run(pairs=[["outside", "word_error_rate"]], allowed_data_dirs=["elsewhere"])
    assert len(refused.requests) == 0 and refused.score("outside").num_failed == 2
    assert len(allowed.requests) == 2 and allowed.score("outside").num_failed == 0


def e_max_audio_seconds(lab: Lab) -> None:
    import soundfile as sf

    shortest = min(sf.info(str(DEMO / r["audio"])).duration for r in demo_rows(3))
    limited = lab.run(pairs=[["clips", "word_error_rate"]], max_audio_seconds=shortest / 2)
    assert len(lab.run(pairs=[["clips", "word_error_rate"]]).requests) == 3
    assert len(limited.requests) == 0 and limited.score("clips").num_failed == 3
    assert all("max_audio_seconds" in r["error"] for r in limited.records["clips"])


def e_cache_dir(lab: Lab) -> None:
    lab.run(options=RunOptions(), cache=True, cache_dir="my-cache")
    assert (lab.ws.root / "my-cache" / "m.jsonl").is_file()


def e_cache_sampled(lab: Lab) -> None:
    sampled = {"temperature": 0.7}
    lab.run(model=sampled, options=RunOptions(), cache=True)
    assert len(lab.run(model=sampled, options=RunOptions(), cache=True).requests) == 3
    lab.run(model=sampled, options=RunOptions(), cache=True, cache_sampled=True)
    assert len(lab.run(model=sampled, options=RunOptions(), cache=True, cache_sampled=True).requests) == 0


def judged(lab: Lab, **judge: Any) -> Obs:
    return lab.run(pairs=[["qs", "llm_judge_binary"]], judge_properties=lab.judge_properties(**judge))


def e_judge_model(lab: Lab) -> None:
    assert {s.body["model"] for s in judged(lab, judge_model="judge-x").judged} == {"judge-x"}


def e_judge_type(lab: Lab) -> None:
    note = "judge_properties.judge_type changes nothing"
    assert note not in judged(lab).stderr and note in judged(lab, judge_type="vllm").stderr


def e_judge_api_endpoint(lab: Lab) -> None:
    with other_endpoint(lambda s, n: "Rating: 0") as other:
        obs = judged(lab, judge_api_endpoint=other.url)
        assert obs.judged == [] and len(other.requests) == 3
    assert obs.score().score == 0.0


def e_judge_api_key(lab: Lab) -> None:
    assert {s.headers.get("Authorization") for s in judged(lab, judge_api_key="judge-key-123").judged} == {"Bearer judge-key-123"}


def e_judge_api_version(lab: Lab) -> None:
    azure = judged(lab, judge_api_key="judge-key-123", judge_api_version="2024-06-01").judged
    assert {(s.headers.get("api-key"), s.query.get("api-version")) for s in azure} == {("judge-key-123", "2024-06-01")}


def e_judge_concurrency(lab: Lab) -> None:
    lab.judge.handler = lambda seen, n: Reply(payload={"choices": [{"message": {"content": "Rating: 1"}}]}, delay=0.3)
    assert max(s.concurrent for s in judged(lab, judge_concurrency=1).judged) == 1
    assert max(s.concurrent for s in judged(lab, judge_concurrency=3).judged) > 1


def e_judge_temperature(lab: Lab) -> None:
    assert {s.body["temperature"] for s in judged(lab, judge_temperature=0.4).judged} == {0.4}


def e_judge_prompt_model_override(lab: Lab) -> None:
    template = "SPECIAL [Q] {question} [R] {reference} [A] {answer}"
    (lab.ws.root / "prompts.yaml").write_text(json.dumps({"judge_prompts": {"llm_judge_binary": {"reference": {"special": template}}}}))
    default = lab.run(pairs=[["qs", "llm_judge_binary"]], judge_properties=lab.judge_properties(), prompts_file="prompts.yaml").judged
    special = lab.run(pairs=[["qs", "llm_judge_binary"]], judge_properties=lab.judge_properties(judge_prompt_model_override="special"),
                      prompts_file="prompts.yaml").judged
    assert not any(s.text.startswith("SPECIAL") for s in default) and all(s.text.startswith("SPECIAL") for s in special)


def e_judge_timeout(lab: Lab) -> None:
    lab.judge.handler = lambda seen, n: Reply(payload={"choices": [{"message": {"content": "Rating: 1"}}]}, delay=1.0)
    assert judged(lab).score().num_failed == 0 and judged(lab, judge_timeout=0.3).score().num_failed == 3


def e_judge_retry_attempts(lab: Lab) -> None:
    tried: set[str] = set()

    def handler(seen: Seen, n: int):
        if seen.text not in tried:
            tried.add(seen.text)
            return Reply(503, {"error": {"message": "busy"}})
        return "Rating: 1"
    lab.judge.handler = handler
    assert judged(lab).score().num_failed == 3
    tried.clear()
    assert judged(lab, judge_retry_attempts=1).score().num_failed == 0


def e_judge_max_tokens(lab: Lab) -> None:
    assert {s.body.get("max_tokens") for s in judged(lab).judged} == {None}
    assert {s.body.get("max_tokens") for s in judged(lab, judge_max_tokens=20).judged} == {20}


def e_judge_verify_ssl(lab: Lab) -> None:
    with other_endpoint(lambda s, n: "Rating: 1", ssl_context=self_signed(lab.ws.root)) as secure:
        assert judged(lab, judge_api_endpoint=secure.url).score().num_failed == 3
        assert judged(lab, judge_api_endpoint=secure.url, judge_verify_ssl=False).score().num_failed == 0


# --- effects: runspec fields ---------------------------------------------------------------------


def r_hf_repo(lab: Lab) -> None:
    lab.ws.jsonl([{**q, "question": f"question {i + 7}"} for i, q in enumerate(QS)], "data/qs2.jsonl")
    assert lab.run().texts != lab.run(spec={"qs": {"hf_repo": "data/qs2.jsonl"}}).texts


def r_subset(lab: Lab) -> None:
    from tests.test_catalog import hub_folder

    hub_folder(lab.ws.root / "data" / "snap", {("one", "test"): QS[:1], ("two", "test"): QS[1:]})
    assert len(lab.run(spec={"qs": {"hf_repo": "data/snap", "subset": "one"}}).requests) == 1
    assert len(lab.run(spec={"qs": {"hf_repo": "data/snap", "subset": "two"}}).requests) == 2


def r_split(lab: Lab) -> None:
    lab.ws.jsonl(QS[:1], "data/split/test.jsonl")
    lab.ws.jsonl(QS[1:], "data/split/validation.jsonl")
    assert len(lab.run(spec={"qs": {"hf_repo": "data/split"}}).requests) == 1
    assert len(lab.run(spec={"qs": {"hf_repo": "data/split", "split": "validation"}}).requests) == 2


def r_revision(lab: Lab) -> None:
    lab.ws.jsonl(QS, "data/folder/part.jsonl")
    assert lab.run(spec={"qs": {"hf_repo": "data/folder"}}).error is None
    assert "revision 'v1' names a hub revision" in lab.run(spec={"qs": {"hf_repo": "data/folder", "revision": "v1"}}).error


def r_format(lab: Lab) -> None:
    with extra_dataset("tw", {"hf_repo": "data/mc.jsonl", "id_column": "id", "modality": "text", "audio_column": None,
                              "textual_input_column": "question", "target_column": "answer"}):
        plain = lab.run(pairs=[["tw", "accuracy"]])
        as_twinkle = lab.run(pairs=[["tw", "accuracy"]], spec={"tw": {"format": "twinkle"}})
    assert not any("A. cat" in t for t in plain.texts) and all("A. cat" in t for t in as_twinkle.texts)


def callhome(lab: Lab) -> contextlib.AbstractContextManager:
    folder = Path(shutil.copytree(REPO / "tests" / "fixtures" / "callhome", lab.ws.root / "ch", ignore=shutil.ignore_patterns("*.py", "*.json")))
    return extra_dataset("ch", {"hf_repo": str(folder), "format": "callhome", "id_column": "id"})


def r_segment(lab: Lab) -> None:
    with callhome(lab):
        utterances = lab.run(pairs=[["ch", "word_error_rate"]])
        turns = lab.run(pairs=[["ch", "word_error_rate"]], spec={"ch": {"segment": "turns"}})
    assert 0 < len(turns.requests) < len(utterances.requests)


def r_window_s(lab: Lab) -> None:
    with callhome(lab):
        wide = lab.run(pairs=[["ch", "speaker_diarization"]], spec={"ch": {"segment": "turns", "window_s": 30}})
        narrow = lab.run(pairs=[["ch", "speaker_diarization"]], spec={"ch": {"segment": "turns", "window_s": 5}})
    assert len(narrow.requests) > len(wide.requests)


def r_language(lab: Lab) -> None:
    english = lab.run(pairs=[["clips", "word_error_rate"]]).score("clips").details["normalizer"]
    french = lab.run(pairs=[["clips", "word_error_rate"]], spec={"clips": {"language": "french"}}).score("clips").details["normalizer"]
    assert (english, french) == ("whisper_english", "basic")


def r_target_language(lab: Lab) -> None:
    english = lab.run(pairs=[["qs", "bleu"]]).score().details["tokenizer"]
    chinese = lab.run(pairs=[["qs", "bleu"]], spec={"qs": {"target_language": "zh"}}).score().details["tokenizer"]
    assert (english, chinese) == ("13a", "zh")


def r_modality(lab: Lab) -> None:
    spoken = lab.run(pairs=[["clips", "word_error_rate"]], spec={"clips": {"textual_input_column": "question"}})
    both = lab.run(pairs=[["clips", "word_error_rate"]], spec={"clips": {"textual_input_column": "question", "modality": "audio_text"}})
    assert {s.text for s in spoken.requests} == {""} and {s.text for s in both.requests} == {"What is said?"}


def r_audio_column(lab: Lab) -> None:
    first = lab.run(pairs=[["clips", "word_error_rate"]]).requests
    second = lab.run(pairs=[["clips", "word_error_rate"]], spec={"clips": {"audio_column": "audio2"}}).requests
    assert len({s.audio_seconds[0] for s in first}) == 3 and len({s.audio_seconds[0] for s in second}) == 1


def r_target_column(lab: Lab) -> None:
    assert {r["reference"] for r in lab.run(spec={"qs": {"target_column": "alt"}}).records["qs"]} == {"alt 0", "alt 1", "alt 2"}
    assert {r["reference"] for r in lab.run().records["qs"]} == {"answer 0", "answer 1", "answer 2"}


def r_additional_instruction_column(lab: Lab) -> None:
    assert lab.run(spec={"qs": {"additional_instruction_column": "instr"}}).texts == [f"Instruction {i}.\nquestion {i}" for i in range(3)]


def r_textual_input_column(lab: Lab) -> None:
    assert lab.run(spec={"qs": {"textual_input_column": "question2"}}).texts == [f"other question {i}" for i in range(3)]


def r_transcript_column(lab: Lab) -> None:
    judge = {"pairs": [["qs", "llm_judge_binary"]], "judge_properties": lab.judge_properties()}
    assert not any("spoken words" in s.text for s in lab.run(**judge).judged)
    assert all("spoken words" in s.text for s in lab.run(spec={"qs": {"transcript_column": "transcript"}}, **judge).judged)


def r_id_column(lab: Lab) -> None:
    assert {r["id"] for r in lab.run().records["qs"]} == {"q0", "q1", "q2"}
    assert {r["id"] for r in lab.run(spec={"qs": {"id_column": None}}).records["qs"]} == {"0", "1", "2"}


def r_language_column(lab: Lab) -> None:
    spec = {"language": "multilingual"}
    whole = lab.run(spec={"qs": spec}, filters={"language": "en"})
    rows = lab.run(spec={"qs": {**spec, "language_column": "lang"}}, filters={"language": "en"})
    assert len(whole.requests) == 3 and rows.texts == ["question 0", "question 2"]


def r_subset_column(lab: Lab) -> None:
    assert "subsets" not in lab.run().score().details
    assert set(lab.run(spec={"qs": {"subset_column": "group"}}).score().details["subsets"]) == {"g1", "g2"}


def r_keep_subsets(lab: Lab) -> None:
    kept = lab.run(spec={"qs": {"subset_column": "group", "keep_subsets": ["g1"]}})
    assert kept.texts == ["question 0", "question 2"] and set(kept.score().details["subsets"]) == {"g1"}
    none = lab.run(spec={"qs": {"subset_column": "group", "keep_subsets": ["g3"]}})
    assert "no sample selected — keep_subsets ['g3'] (subset_column 'group') left out 3" in none.error
    assert "keep_subsets selects rows by their subset_column, and this entry has none" in lab.run(spec={"qs": {"keep_subsets": ["g1"]}}).error


def r_accented(lab: Lab) -> None:
    assert lab.run(filters={"accented": False}).error is None
    assert "the filters leave out dataset 'qs'" in lab.run(spec={"qs": {"accented": True}}, filters={"accented": False}).error


def _shouting() -> None:
    from lalmeval.postprocess import POSTPROCESSORS
    from lalmeval.postprocess.general import GeneralPostprocessor
    from lalmeval.preprocess import PREPROCESSORS
    from lalmeval.preprocess.general import GeneralPreprocessor
    from lalmeval.results.records import Prompt

    if "ShoutingPreprocessor" in getattr(PREPROCESSORS, "_items", {}):
        return

    @PREPROCESSORS.register("ShoutingPreprocessor")
    class ShoutingPreprocessor(GeneralPreprocessor):
        def prompt(self, sample, repeat: int = 0) -> Prompt:
            prompt = super().prompt(sample, repeat)
            return Prompt(text=prompt.text.upper(), system=prompt.system, with_audio=prompt.with_audio)

    @POSTPROCESSORS.register("ShoutingPostprocessor")
    class ShoutingPostprocessor(GeneralPostprocessor):
        def process(self, reply: str) -> str:
            return super().process(reply).upper()


def r_preprocessor(lab: Lab) -> None:
    _shouting()
    assert lab.run(spec={"qs": {"preprocessor": "ShoutingPreprocessor"}}).texts == [f"QUESTION {i}" for i in range(3)]


def r_postprocessor(lab: Lab) -> None:
    _shouting()
    shouted = lab.run(spec={"qs": {"postprocessor": "ShoutingPostprocessor"}}).records["qs"]
    assert {r["prediction"] for r in shouted} == {"ANSWER 0", "ANSWER 1", "ANSWER 2"}


def r_metrics(lab: Lab) -> None:
    assert [s.metric for s in lab.run(pairs=[["qs", "all"]], spec={"qs": {"metrics": ["accuracy"]}}).scores] == ["accuracy"]
    assert [s.metric for s in lab.run(pairs=[["qs", "all"]], spec={"qs": {"metrics": ["bleu", "chrf"]}}).scores] == ["bleu", "chrf"]


def r_instruction(lab: Lab) -> None:
    assert lab.run(spec={"qs": {"instruction": "Reply in kind."}}).texts == [f"Reply in kind.\nquestion {i}" for i in range(3)]


def r_choices_column(lab: Lab) -> None:
    colours = lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {"choices_column": "options2"}})
    assert set(option_orders(colours)) == {("red", "blue", "green", "grey")}


def r_choices(lab: Lab) -> None:
    fixed = lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {"choices_column": None, "choices": ["yes", "no"]}})
    assert all("A. yes\nB. no" in t for t in fixed.texts)


def mc_reply(text: str) -> None:
    def handler(seen: Seen, n: int) -> str:
        return text
    return handler


def r_answer_extraction(lab: Lab) -> None:
    lab.ep.handler = mc_reply("A first thought, but the final answer is \\boxed{B}")
    default = lab.run(pairs=[["mc", "accuracy"]]).score("mc").score
    first = lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {"answer_extraction": "first_letter"}}).score("mc").score
    assert (default, first) == (100.0, 0.0)


def r_answer_pattern(lab: Lab) -> None:
    lab.ep.handler = mc_reply("ANS=A PICK=B")
    regex = {"answer_extraction": "regex"}
    ans = lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {**regex, "answer_pattern": r"ANS=(\w)"}}).score("mc").score
    pick = lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {**regex, "answer_pattern": r"PICK=(\w)"}}).score("mc").score
    assert (ans, pick) == (0.0, 100.0)


def r_mc_template(lab: Lab) -> None:
    assert all("選項" in t for t in lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {"mc_template": "mc_options_zh"}}).texts)


def r_image_column(lab: Lab) -> None:
    shutil.copy(REPO / "tests" / "fixtures" / "images" / "three.png", lab.ws.root / "data" / "three.png")  # a dataset reads its own folder
    lab.ws.jsonl([{**q, "picture": "three.png"} for q in QS], "data/qs.jsonl")
    assert {len(s.images) for s in lab.run().requests} == {0}
    assert {len(s.images) for s in lab.run(spec={"qs": {"image_column": "picture"}}).requests} == {1}


def r_turns_column(lab: Lab) -> None:
    lab.ws.jsonl([{**q, "turns": [f"question {i}", "and then?"]} for i, q in enumerate(QS)], "data/qs.jsonl")
    assert len(lab.run(pairs=[["qs", "bleu"]]).requests) == 3
    assert len(lab.run(pairs=[["qs", "bleu"]], spec={"qs": {"turns_column": "turns", "textual_input_column": None}}).requests) == 6


def r_messages_column(lab: Lab) -> None:
    lab.ws.jsonl([{**q, "msgs": [{"role": "user", "content": f"question {i + 3}"}]} for i, q in enumerate(QS)], "data/qs.jsonl")
    obs = lab.run(spec={"qs": {"messages_column": "msgs", "textual_input_column": None}})
    assert obs.texts == ["question 3", "question 4", "question 5"]


def r_long_audio(lab: Lab) -> None:
    chunked = lab.run(pairs=[["clips", "word_error_rate"]], model={"chunk_size": 1})
    truncated = lab.run(pairs=[["clips", "word_error_rate"]], model={"chunk_size": 1}, spec={"clips": {"long_audio": "truncate"}})
    assert len(chunked.requests) > 3 and len(truncated.requests) == 3


def r_shuffle_options(lab: Lab) -> None:
    shuffled = lab.run(pairs=[["mc", "accuracy"]], spec={"mc": {"shuffle_options": True}})
    assert option_orders(shuffled) != option_orders(lab.run(pairs=[["mc", "accuracy"]]))


def r_repeat_runs(lab: Lab) -> None:
    assert len(lab.run(spec={"qs": {"repeat_runs": 3}}).requests) == 9


def r_origin(lab: Lab) -> None:
    from lalmeval.cli.commands import main

    lab.run(spec={"qs": {"origin": "written for this test"}})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["validate", "--config", str(lab.ws.root / "config.yaml")])
    assert "origin of qs: written for this test" in out.getvalue()


def r_normalizer(lab: Lab) -> None:
    lab.ep.handler = mc_reply("Answer 0!")
    loose = lab.run(pairs=[["qs", "word_error_rate"]]).score()
    strict = lab.run(pairs=[["qs", "word_error_rate"]], spec={"qs": {"normalizer": "none"}}).score()
    assert strict.details["normalizer"] == "none" and strict.score > loose.score


def r_error_unit(lab: Lab) -> None:
    assert lab.run(pairs=[["qs", "word_error_rate"]], spec={"qs": {"error_unit": "character"}}).score().details["unit"] == "character"
    assert lab.run(pairs=[["qs", "word_error_rate"]]).score().details["unit"] == "word"


def r_judge_template(lab: Lab) -> None:
    default = lab.run(pairs=[["qs", "llm_judge_binary"]], judge_properties=lab.judge_properties())
    lab.judge.handler = lambda seen, n: "The answer is correct. [Correct]"
    kimi = lab.run(pairs=[["qs", "llm_judge_binary"]], spec={"qs": {"judge_template": "au_harness_binary"}},
                   judge_properties=lab.judge_properties())
    assert default.score().details["judge_template"]["name"] == "default"
    assert kimi.score().details["judge_template"]["name"] == "au_harness_binary"
    assert {s.text for s in default.judged}.isdisjoint({s.text for s in kimi.judged})
    per_metric = lab.run(pairs=[["qs", "llm_judge_binary"]], spec={"qs": {"judge_template": {"llm_judge_binary": "au_harness_binary"}}},
                         judge_properties=lab.judge_properties())
    assert per_metric.score().details["judge_template"] == kimi.score().details["judge_template"]


def r_protocol(lab: Lab) -> None:
    ours = lab.run(pairs=[["qs", "word_error_rate"]]).score()
    theirs = lab.run(pairs=[["qs", "word_error_rate"]], spec={"qs": {"protocol": "open_asr"}}).score()
    assert ours.details["protocol"]["name"] == "lalmeval" and theirs.details["protocol"]["name"] == "open_asr"
    assert theirs.details["normalizer"] == "open_asr" != ours.details["normalizer"]


def r_transcription_prompt(lab: Lab) -> None:
    transcribe = {"inference_type": "transcription"}
    plain = lab.run(pairs=[["clips", "word_error_rate"]], model=transcribe, spec={"clips": {"instruction": "Transcribe the audio."}})
    prompted = lab.run(pairs=[["clips", "word_error_rate"]], model=transcribe,
                       spec={"clips": {"instruction": "Transcribe the audio.", "transcription_prompt": "Heater, lights, weather."}})
    # the instruction is never Whisper's preceding text; the runspec's prompt is, and the records say so
    assert [s.form.get("prompt") for s in plain.requests] == [None] * 3
    assert [s.form.get("prompt") for s in prompted.requests] == ["Heater, lights, weather."] * 3
    assert {r["params"].get("prompt") for r in prompted.records["clips"]} == {"Heater, lights, weather."}


def r_prompt_template(lab: Lab) -> None:
    framed = lab.run(spec={"qs": {"instruction": "Answer.", "prompt_template": "PRE {instruction} POST"}})
    assert all(s.text.startswith("PRE Answer. POST") for s in framed.requests)
    assert not any("PRE" in s.text for s in lab.run(spec={"qs": {"instruction": "Answer."}}).requests)


def r_reproduces(lab: Lab) -> None:
    from lalmeval.cli.commands import main

    assert "reproduces must be '<peer>:<task>'" in (lab.run(spec={"qs": {"reproduces": "not-a-peer"}}).error or "")
    lab.run(spec={"qs": {"reproduces": "kimi:qs"}})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["list", "qs", "--config", str(lab.ws.root / "config.yaml")])
    assert "kimi" in out.getvalue()


def chatty_reply(seen: Seen, n: int) -> str:
    found = re.search(r"question (\d+)", seen.text)
    return f"Transcription: answer {found.group(1) if found else 0}\n\nIf you have any more questions, feel free to ask."


def e_reading(lab: Lab) -> None:
    lab.ep.handler = chatty_reply
    careful = lab.run(pairs=[["qs", "word_error_rate"]]).score()
    verbatim = lab.run(pairs=[["qs", "word_error_rate"]], reading="verbatim").score()
    assert careful.score == 0.0 and verbatim.score > 100.0
    assert careful.details["reading"]["rules"] == {"closer": 3, "lead_in": 3} and verbatim.details["reading"]["rules"] == {}


def r_reading(lab: Lab) -> None:
    lab.ep.handler = chatty_reply
    verbatim = lab.run(pairs=[["qs", "word_error_rate"]], spec={"qs": {"reading": "verbatim"}}).score()
    careful = lab.run(pairs=[["qs", "word_error_rate"]], spec={"qs": {"reading": "careful"}}, reading="verbatim").score()
    assert verbatim.details["reading"]["mode"] == "verbatim" and verbatim.score > 100.0
    assert careful.details["reading"]["mode"] == "careful" and careful.score == 0.0


def r_label_synonyms(lab: Lab) -> None:
    lab.ep.handler = mc_reply("It sounds like a puppy to me.")
    spec = {"mc": {"choices_column": None, "choices": ["cat", "hound", "cow", "bird"], "target_column": "answer"}}
    plain = lab.run(pairs=[["mc", "accuracy"]], spec=spec).score("mc")
    spec["mc"]["label_synonyms"] = {"hound": ["puppy"]}
    taught = lab.run(pairs=[["mc", "accuracy"]], spec=spec).score("mc")
    assert plain.score == 0.0 and plain.details["reading"]["unreadable"] == 3
    assert taught.score == 100.0 and taught.details["reading"]["rules"] == {"label_in_reply": 3, "synonym": 3}

# --- effects: prices and budgets -----------------------------------------------------------------

USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
         "prompt_tokens_details": {"audio_tokens": 60}, "completion_tokens_details": {"audio_tokens": 4}}


def with_usage(handler: Callable) -> Callable:
    """`handler`'s reply, with the usage a priced server reports (audio tokens among the prompt and completion)."""
    def reply(seen: Seen, n: int) -> Reply:
        payload = {"id": "x", "object": "chat.completion", "usage": USAGE,
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": handler(seen, n)}, "finish_reason": "stop"}]}
        return Reply(payload=payload)
    return reply


PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def price_effect(key: str, expected: float) -> Callable[[Lab], None]:
    """One key of a model's price changes the run's cost as the reported usage says (3 replies of USAGE)."""
    def effect(lab: Lab) -> None:
        lab.ep.handler = with_usage(default_reply)
        base = lab.run(model={"price": PRICE}).final["cost"]["total"]
        changed = lab.run(model={"price": {**PRICE, key: 10.0}}).final["cost"]["total"]
        assert base == pytest.approx(3 * (100 * 1.0 + 10 * 2.0) / 1e6)
        assert changed == pytest.approx(expected)
    return effect


def judge_price_effect(key: str) -> Callable[[Lab], None]:
    def effect(lab: Lab) -> None:
        lab.judge.handler = with_usage(lambda seen, n: "Rating: 1")
        def cost(price: dict) -> dict:
            return lab.run(pairs=[["qs", "llm_judge_binary"]], model={"price": PRICE},
                           judge_properties=lab.judge_properties(judge_price=price)).final["cost"]
        cheap, dear = cost(PRICE), cost({**PRICE, key: 10.0})
        assert cheap["judge"] < dear["judge"] and cheap["models"] == dear["models"]
    return effect


def e_max_cost(lab: Lab) -> None:
    lab.ep.handler = with_usage(default_reply)
    whole = lab.run(pairs=[["many", "accuracy"]], model={"batch_size": 1, "price": PRICE})
    stopped = lab.run(pairs=[["many", "accuracy"]], model={"batch_size": 1, "price": PRICE}, max_cost=3 * 120 / 1e6)
    assert len(whole.requests) == 12 and not whole.final["stopped"]
    assert len(stopped.requests) < 12 and stopped.final["stopped"].startswith("stopped at the budget")
    assert "max_cost needs a price" in (lab.run(max_cost=1.0).error or "")


def e_max_run_tokens(lab: Lab) -> None:
    lab.ep.handler = with_usage(default_reply)
    stopped = lab.run(pairs=[["many", "accuracy"]], model={"batch_size": 1}, max_run_tokens=300)
    assert 3 <= len(stopped.requests) < 12 and stopped.final["stopped"].startswith("stopped at the budget")


# --- effects: spoken replies and their transcriber ----------------------------------------------

def _wav(seconds: float, pitch: int = 0) -> str:
    buffer = io.BytesIO()
    tone = np.sin(np.arange(int(seconds * 16000)) / (5 + pitch)) * 0.3   # another pitch per answer: distinct files, distinct transcripts
    sf.write(buffer, tone.astype("float32"), 16000, format="WAV", subtype="PCM_16")
    return base64.b64encode(buffer.getvalue()).decode()


def spoken_reply(seen: Seen, n: int, seconds: float = 0.5) -> Reply:
    """A chat answer with a spoken part, as OpenAI's modalities audio gives it."""
    text = default_reply(seen, n)
    message = {"role": "assistant", "content": text, "audio": {"id": "a", "data": _wav(seconds, sum(map(ord, text)) % 7), "transcript": text}}
    return Reply(payload={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


SPEAKS = {"modalities": ["text", "audio"]}


def voice_run(lab: Lab, asr_url: str, transcriber: Optional[dict] = None) -> Obs:
    """The lab's text questions answered aloud and scored by speech_wer through a transcriber at `asr_url`."""
    lab.ep.handler = spoken_reply
    settings = {"url": asr_url, "model": "asr", "retry_attempts": 0, "timeout": 10, **(transcriber or {})}
    return lab.run(pairs=[["qs", "speech_wer"]], model=SPEAKS, transcriber=settings)


def e_modalities(lab: Lab) -> None:
    lab.ep.handler = spoken_reply
    written, spoken = lab.run(), lab.run(model=SPEAKS)
    assert set(written.bodies("modalities")) == {None} and [r["audio_path"] for r in written.records["qs"]] == [None] * 3
    assert {tuple(m) for m in spoken.bodies("modalities")} == {("text", "audio")}
    assert all((spoken.run_dir / r["audio_path"]).is_file() for r in spoken.records["qs"])


def e_audio_voice(lab: Lab) -> None:
    lab.ep.handler = spoken_reply
    voices = {b["voice"] for b in lab.run(model={**SPEAKS, "audio": {"voice": "nova"}}).bodies("audio")}
    assert voices == {"nova"} and {b["voice"] for b in lab.run(model=SPEAKS).bodies("audio")} == {"alloy"}


def e_audio_reply_format(lab: Lab) -> None:
    lab.ep.handler = spoken_reply
    assert {b["format"] for b in lab.run(model={**SPEAKS, "audio": {"format": "flac"}}).bodies("audio")} == {"flac"}
    assert {b["format"] for b in lab.run(model=SPEAKS).bodies("audio")} == {"wav"}


def e_stream(lab: Lab) -> None:
    assert set(lab.run().bodies("stream")) == {None}
    streamed = lab.run(model={"stream": True})
    assert set(streamed.bodies("stream")) == {True} and {tuple(b) for b in streamed.bodies("stream_options")} == {("include_usage",)}


def e_max_audio_mb(lab: Lab) -> None:
    lab.ep.handler = lambda seen, n: spoken_reply(seen, n, seconds=2.0)   # 64 kB of WAV
    assert {r["error"] for r in lab.run(model=SPEAKS).records["qs"]} == {None}
    errors = {r["error"] for r in lab.run(model={**SPEAKS, "max_audio_mb": 0.01}).records["qs"]}
    assert len(errors) == 1 and "max_audio_mb" in errors.pop()


def t_url(lab: Lab) -> None:
    with other_endpoint(lambda seen, n: "answer 1") as asr, other_endpoint(lambda seen, n: "answer 1") as elsewhere:
        voice_run(lab, asr.url)
        voice_run(lab, asr.url, {"url": elsewhere.url})
        assert len(asr.requests) == 3 and len(elsewhere.requests) == 3


def t_model(lab: Lab) -> None:
    with other_endpoint(lambda seen, n: "answer 1") as asr:
        voice_run(lab, asr.url, {"model": "whisper-2"})
        assert {s.form["model"] for s in asr.requests} == {"whisper-2"}


def t_auth_token(lab: Lab) -> None:
    with other_endpoint(lambda seen, n: "answer 1") as asr:
        voice_run(lab, asr.url)
        voice_run(lab, asr.url, {"auth_token": "asr-token-12345"})
        assert [s.headers.get("Authorization") for s in asr.requests] == [None] * 3 + ["Bearer asr-token-12345"] * 3


def t_timeout(lab: Lab) -> None:
    with other_endpoint(lambda seen, n: Reply(payload={"text": "answer 1"}, delay=1.0)) as asr:
        assert voice_run(lab, asr.url, {"timeout": 5}).score().num_failed == 0
        failed = voice_run(lab, asr.url, {"timeout": 0.3}).score()
        assert failed.num_failed == 3 and "transcription failed: timeout after 0.3s" in failed.details["failures"]


def t_retry_attempts(lab: Lab) -> None:
    busy = lambda seen, n: Reply(status=503, payload={"error": {"message": "busy"}}) if n < 3 else "answer 1"  # noqa: E731
    with other_endpoint(busy) as asr:
        assert voice_run(lab, asr.url, {"retry_attempts": 0}).score().num_failed == 3
    with other_endpoint(busy) as asr:
        assert voice_run(lab, asr.url, {"retry_attempts": 3}).score().num_failed == 0


def t_batch_size(lab: Lab) -> None:
    with other_endpoint(lambda seen, n: Reply(payload={"text": "answer 1"}, delay=0.3)) as asr:
        voice_run(lab, asr.url, {"batch_size": 1})
        assert max(s.concurrent for s in asr.requests) == 1
    with other_endpoint(lambda seen, n: Reply(payload={"text": "answer 1"}, delay=0.3)) as asr:
        voice_run(lab, asr.url, {"batch_size": 3})
        assert max(s.concurrent for s in asr.requests) > 1


def _served_echo(port: int, wait: float = 0) -> str:
    return f"sleep {wait}; exec lalmeval serve --model echo --served-model-name asr --port {port}"


def t_launch(lab: Lab) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    down = voice_run(lab, url).score()
    up = voice_run(lab, url, {"launch": _served_echo(port), "launch_timeout": 60})
    assert down.num_failed == 3 and up.score().num_failed == 0 and (up.run_dir / "launch_transcriber.log").is_file()


def t_launch_timeout(lab: Lab) -> None:
    port = free_port()
    slow = {"launch": _served_echo(port, wait=3)}
    assert "did not answer" in (voice_run(lab, f"http://127.0.0.1:{port}/v1", {**slow, "launch_timeout": 1}).error or "")
    assert voice_run(lab, f"http://127.0.0.1:{port}/v1", {**slow, "launch_timeout": 60}).score().num_failed == 0


def t_name(lab: Lab) -> None:
    port = free_port()
    obs = voice_run(lab, f"http://127.0.0.1:{port}/v1", {"name": "asr", "launch": _served_echo(port), "launch_timeout": 60})
    assert (obs.run_dir / "launch_asr.log").is_file()


def t_inference_type(lab: Lab) -> None:
    with other_endpoint(lambda seen, n: "answer 1") as asr:
        assert voice_run(lab, asr.url, {"inference_type": "transcription"}).error is None
        assert "transcriber.inference_type" in (voice_run(lab, asr.url, {"inference_type": "openai"}).error or "")


# A model entry's keys that a transcription request has no use for: each is refused under transcriber, naming itself.
REFUSED_VALUES = {"api_version": "2024-06-01", "delay": 10, "chunk_size": 30, "long_audio": "truncate", "replicas": 2, "temperature": 0.5,
                  "max_tokens": 5, "audio_format": "audio_url", "max_reply_mb": 1, "verify_ssl": False, "modalities": ["text"],
                  "stream": True, "max_audio_mb": 1, "audio.voice": "nova", "audio.format": "flac"}


def refused_under_transcriber(key: str) -> Callable[[Lab], None]:
    def effect(lab: Lab) -> None:
        head, _, tail = key.partition(".")
        value = REFUSED_VALUES.get(key, GENERATION.get(tail))
        setting = {head: {tail: value}} if tail else {head: value}
        if head == "price":   # a price is whole or invalid: give every required field, so only the transcriber refuses it
            setting = {"price": {"input_per_mtok": 1.0, "output_per_mtok": 1.0, tail: 2.0}}
        with other_endpoint(lambda seen, n: "answer 1") as asr:
            error = voice_run(lab, asr.url, setting).error or ""
        assert ": transcriber" in error and head in error, error
    return effect


# --- the table -----------------------------------------------------------------------------------

EFFECTS: dict[str, Callable[[Lab], None]] = {
    "dataset_metric": e_dataset_metric,
    "filters.num_samples": e_num_samples, "filters.shuffle": e_shuffle, "filters.length_filter": e_length_filter,
    "filters.language": e_language, "filters.accented": e_accented, "filters.user_prompt_add_ons": e_user_prompt_add_ons,
    "filters.system_prompts": e_system_prompts,
    "aggregate": e_aggregate,
    "temperature_overrides[].model": e_temperature_overrides_model, "temperature_overrides[].task": e_temperature_overrides_task,
    "temperature_overrides[].temperature": e_temperature_overrides_temperature,
    "generation_overrides[].model": e_generation_overrides_model, "generation_overrides[].task": e_generation_overrides_task,
    "prompt_rules[].model": e_prompt_rules_model, "prompt_rules[].task": e_prompt_rules_task, "prompt_rules[].language": e_prompt_rules_language,
    "prompt_rules[].system_prompts": e_prompt_rules_system_prompts, "prompt_rules[].user_prompt_add_ons": e_prompt_rules_user_prompt_add_ons,
    "prompt_rules[].instruction": e_prompt_rules_instruction, "prompt_rules[].mc_template": e_prompt_rules_mc_template,
    "shuffle_options": e_shuffle_options, "repeat_runs": e_repeat_runs, "reading": e_reading,
    "models[].name": e_name, "models[].inference_type": e_inference_type, "models[].url": e_url, "models[].model": e_model,
    "models[].auth_token": e_auth_token, "models[].api_version": e_api_version, "models[].delay": e_delay,
    "models[].retry_attempts": e_retry_attempts, "models[].timeout": e_timeout, "models[].batch_size": e_batch_size,
    "models[].chunk_size": e_chunk_size, "models[].long_audio": e_long_audio, "models[].replicas": e_replicas,
    "models[].launch": e_launch, "models[].launch_timeout": e_launch_timeout, "models[].temperature": e_model_temperature,
    "models[].max_tokens": e_model_max_tokens, "models[].audio_format": e_audio_format, "models[].max_reply_mb": e_max_reply_mb,
    "models[].verify_ssl": e_verify_ssl,
    "models[].price.input_per_mtok": price_effect("input_per_mtok", 3 * (100 * 10.0 + 10 * 2.0) / 1e6),
    "models[].price.output_per_mtok": price_effect("output_per_mtok", 3 * (100 * 1.0 + 10 * 10.0) / 1e6),
    "models[].price.audio_input_per_mtok": price_effect("audio_input_per_mtok", 3 * (40 * 1.0 + 60 * 10.0 + 10 * 2.0) / 1e6),
    "models[].price.audio_output_per_mtok": price_effect("audio_output_per_mtok", 3 * (100 * 1.0 + 6 * 2.0 + 4 * 10.0) / 1e6),
    "max_cost": e_max_cost, "max_run_tokens": e_max_run_tokens,


    "models[].verify_ssl": e_verify_ssl, "models[].modalities": e_modalities, "models[].audio.voice": e_audio_voice,
    "models[].audio.format": e_audio_reply_format, "models[].stream": e_stream, "models[].max_audio_mb": e_max_audio_mb,
    "transcriber.url": t_url, "transcriber.model": t_model, "transcriber.auth_token": t_auth_token, "transcriber.timeout": t_timeout,
    "transcriber.retry_attempts": t_retry_attempts, "transcriber.batch_size": t_batch_size, "transcriber.launch": t_launch,
    "transcriber.launch_timeout": t_launch_timeout, "transcriber.name": t_name, "transcriber.inference_type": t_inference_type,
    "runspec_dirs": e_runspec_dirs, "dataset_paths": e_dataset_paths, "datasets": e_datasets, "dataset_root": e_dataset_root, "prompts_file": e_prompts_file,
    "streaming": e_streaming, "seed": e_seed, "bootstrap_resamples": e_bootstrap_resamples, "output_dir": e_output_dir,
    "cache": e_cache, "max_failure_rate": e_max_failure_rate, "allowed_data_dirs": e_allowed_data_dirs,
    "max_audio_seconds": e_max_audio_seconds, "cache_dir": e_cache_dir, "cache_sampled": e_cache_sampled,
    "judge_properties.judge_model": e_judge_model, "judge_properties.judge_type": e_judge_type,
    "judge_properties.judge_api_endpoint": e_judge_api_endpoint, "judge_properties.judge_api_key": e_judge_api_key,
    "judge_properties.judge_api_version": e_judge_api_version, "judge_properties.judge_concurrency": e_judge_concurrency,
    "judge_properties.judge_temperature": e_judge_temperature, "judge_properties.judge_prompt_model_override": e_judge_prompt_model_override,
    "judge_properties.judge_timeout": e_judge_timeout, "judge_properties.judge_retry_attempts": e_judge_retry_attempts,
    "judge_properties.judge_max_tokens": e_judge_max_tokens,
    **{f"judge_properties.judge_price.{key}": judge_price_effect(key)
       for key in ("input_per_mtok", "output_per_mtok", "audio_input_per_mtok", "audio_output_per_mtok")},
    "judge_properties.judge_verify_ssl": e_judge_verify_ssl,
    "runspec.hf_repo": r_hf_repo, "runspec.subset": r_subset, "runspec.split": r_split, "runspec.revision": r_revision,
    "runspec.format": r_format, "runspec.segment": r_segment, "runspec.window_s": r_window_s, "runspec.language": r_language,
    "runspec.target_language": r_target_language, "runspec.modality": r_modality, "runspec.audio_column": r_audio_column,
    "runspec.target_column": r_target_column, "runspec.additional_instruction_column": r_additional_instruction_column,
    "runspec.textual_input_column": r_textual_input_column, "runspec.transcript_column": r_transcript_column,
    "runspec.id_column": r_id_column, "runspec.language_column": r_language_column, "runspec.subset_column": r_subset_column,
    "runspec.accented": r_accented, "runspec.preprocessor": r_preprocessor, "runspec.postprocessor": r_postprocessor,
    "runspec.metrics": r_metrics, "runspec.instruction": r_instruction, "runspec.choices_column": r_choices_column,
    "runspec.choices": r_choices, "runspec.answer_extraction": r_answer_extraction, "runspec.answer_pattern": r_answer_pattern,
    "runspec.mc_template": r_mc_template, "runspec.image_column": r_image_column, "runspec.turns_column": r_turns_column,
    "runspec.messages_column": r_messages_column, "runspec.long_audio": r_long_audio, "runspec.shuffle_options": r_shuffle_options,
    "runspec.repeat_runs": r_repeat_runs, "runspec.origin": r_origin, "runspec.normalizer": r_normalizer, "runspec.error_unit": r_error_unit,
    "runspec.reading": r_reading, "runspec.label_synonyms": r_label_synonyms,
    "runspec.judge_template": r_judge_template, "runspec.keep_subsets": r_keep_subsets, "runspec.prompt_template": r_prompt_template,
    "runspec.transcription_prompt": r_transcription_prompt,
    "runspec.protocol": r_protocol, "runspec.reproduces": r_reproduces,
}
for _layer in ("models[].generation_kwargs", "generation_overrides[]", "runspec.generation_kwargs"):
    for _key in GENERATION:
        EFFECTS[f"{_layer}.{_key}"] = generation_effect(_layer, _key)
for _key in [*REFUSED_VALUES, *(f"generation_kwargs.{k}" for k in GENERATION),
             *(f"price.{k}" for k in ("input_per_mtok", "output_per_mtok", "audio_input_per_mtok", "audio_output_per_mtok"))]:
    EFFECTS[f"transcriber.{_key}"] = refused_under_transcriber(_key)


def test_the_table_covers_every_key():
    """A key missing here has no test of its effect: add one (a key added later comes with its effect)."""
    keys = all_keys()
    missing = sorted(set(keys) - set(EFFECTS))
    stale = sorted(set(EFFECTS) - set(keys))
    assert not missing, f"config keys / runspec fields without an effect test: {missing}"
    assert not stale, f"effect tests for keys that no longer exist: {stale}"


def test_by_default_no_optional_generation_setting_is_sent(lab):
    """The baseline the generation tests compare with: only the model and its temperature."""
    bodies = lab.run().requests
    assert all(set(s.body) == {"model", "messages", "temperature"} for s in bodies)


@pytest.mark.parametrize("key", sorted(EFFECTS))
@pytest.mark.slow
def test_key_has_an_effect(lab, key):
    EFFECTS[key](lab)
