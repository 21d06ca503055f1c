"""`lalmeval serve` survives its model: dead workers are replaced, any exception and any malformed reply costs one
request, audio is bounded from its header, odd headers and arguments get their documented answer, and SIGTERM leaves
no process behind — against the real server process and model classes written by each test."""

import base64
import ctypes  # noqa: F401 - the model module below uses it; importing here shows it exists
import io
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.support.served import Served

MODELS = '''
import ctypes, math, os, pathlib, signal, time
from lalmeval.serve import ApiError, AudioModel, Reply, Segment

HERE = pathlib.Path(__file__).parent

def die(how):
    if how == "exit":
        os._exit(3)
    if how == "segfault":
        ctypes.string_at(0)
    if how == "oom":  # what the out-of-memory killer does
        os.kill(os.getpid(), signal.SIGKILL)

class Fragile(AudioModel):
    """One worker process; a text naming a death dies that way. Every load after the first waits for the file `gate`."""
    name = "fragile"
    processes = 1

    def load(self):
        marker = HERE / f"loads"
        loads = int(marker.read_text()) if marker.exists() else 0
        marker.write_text(str(loads + 1))
        while loads and not (HERE / "gate").exists():
            time.sleep(0.02)

    def generate(self, request):
        die(request.text)
        return f"fine: {request.text}"

class Pair(AudioModel):
    """Two worker processes; 'hold' waits for the file `open`, a death's name dies."""
    name = "pair"
    processes = 2

    def generate(self, request):
        while request.text == "hold" and not (HERE / "open").exists():
            time.sleep(0.02)
        die(request.text)
        return f"fine: {request.text}"

class Batched(Pair):
    """One worker process taking batches of up to 4."""
    name = "batched"
    processes = 1
    max_batch_size = 4

class Stuck(Pair):
    """Two worker processes whose model never finishes loading."""

    def load(self):
        (HERE / f"loading-{os.getpid()}").touch()
        while True:
            time.sleep(0.02)

RAISED = {"SystemExit": lambda: SystemExit(4), "KeyboardInterrupt": KeyboardInterrupt, "GeneratorExit": GeneratorExit,
          "ValueError": lambda: ValueError("plain bug")}

class Raising(AudioModel):
    """Raises the exception its text names (in a thread)."""
    name = "raising"

    def generate(self, request):
        if request.text in RAISED:
            raise RAISED[request.text]()
        return "fine"

class RaisingInWorker(Raising):
    name = "raising-in-worker"
    processes = 1

MALFORMED = {
    "int": 42,
    "none": None,
    "negative usage": Reply("x", -1),
    "usage not a number": Reply("x", "3"),
    "usage true": Reply("x", True),
    "audio tokens over prompt": Reply("x", 1, prompt_tokens=2, audio_tokens=5),
    "text not a string": Reply(42, 1),
    "lone surrogate": "\\ud800",
    "finish reason": Reply("x", 1, finish_reason="done"),
    "segment time": Reply("x", 1, segments=(Segment(math.nan, 1.0, "x"),)),
    "segment backwards": Reply("x", 1, segments=(Segment(2.0, 1.0, "x"),)),
    "segment type": Reply("x", 1, segments=("x",)),
    "refusal status": ApiError(200, "not an error"),
}

class Malformed(AudioModel):
    """Answers the malformed value its text names."""
    name = "malformed"

    def generate(self, request):
        return MALFORMED.get(request.text, "fine")

class ShortBatch(AudioModel):
    name = "short-batch"

    def generate_batch(self, requests):
        return []
'''


@pytest.fixture
def models_folder(tmp_path):
    (tmp_path / "hostile_models.py").write_text(textwrap.dedent(MODELS))
    return tmp_path


def chat(served: Served, text: str, model: str, headers: dict = None) -> tuple[int, dict]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": text}]}).encode()
    status, _, answer = served.raw("POST", "/v1/chat/completions", body, {"Content-Type": "application/json", **(headers or {})})
    return status, json.loads(answer)


def health(served: Served) -> tuple[int, dict]:
    status, _, answer = served.raw("GET", "/health")
    return status, json.loads(answer)


def eventually(check, seconds: float = 60):
    deadline = time.time() + seconds
    while not check():
        assert time.time() < deadline
        time.sleep(0.05)


DEATHS = {"exit": "exited with code 3", "segfault": "killed by SIGSEGV", "oom": "killed by SIGKILL"}


@pytest.mark.parametrize("how", DEATHS)
def test_a_dead_worker_fails_only_its_request_is_replaced_and_health_says_so_meanwhile(models_folder, how):
    with Served("--model", "hostile_models:Fragile", cwd=models_folder) as served:
        assert chat(served, "hello", "fragile")[1]["choices"][0]["message"]["content"] == "fine: hello"
        status, answer = chat(served, how, "fragile")
        assert status == 500 and answer["error"]["type"] == "server_error"
        assert DEATHS[how] in answer["error"]["message"] and "worker process died while running this request" in answer["error"]["message"]
        # the replacement waits for `gate` while loading: health tells it, and a request waits rather than failing
        eventually(lambda: (models_folder / "loads").read_text() == "2")
        status, state = health(served)
        assert status == 503 and (state["status"], state["workers_ready"], state["workers_replaced"]) == ("restarting", 0, 1)
        with ThreadPoolExecutor(1) as pool:
            later = pool.submit(chat, served, "after", "fragile")
            time.sleep(0.3)
            assert not later.done()
            (models_folder / "gate").touch()
            status, answer = later.result(timeout=60)
        assert status == 200 and answer["choices"][0]["message"]["content"] == "fine: after"
        status, state = health(served)
        assert status == 200 and (state["status"], state["workers_ready"], state["workers_replaced"]) == ("ok", 1, 1)
    assert "Traceback" not in "".join(served.output)


def test_a_worker_dying_leaves_the_request_running_in_another_worker_alone(models_folder):
    with Served("--model", "hostile_models:Pair", cwd=models_folder) as served, ThreadPoolExecutor(1) as pool:
        held = pool.submit(chat, served, "hold", "pair")
        eventually(lambda: served.health()["running"] == 1)
        status, answer = chat(served, "segfault", "pair")
        assert status == 500 and "killed by SIGSEGV" in answer["error"]["message"]
        (models_folder / "open").touch()
        assert held.result(timeout=60)[1]["choices"][0]["message"]["content"] == "fine: hold"
        eventually(lambda: served.health()["status"] == "ok")
        assert [chat(served, t, "pair")[1]["choices"][0]["message"]["content"] for t in "ab"] == ["fine: a", "fine: b"]


def test_when_a_worker_dies_in_a_batch_only_the_request_that_killed_it_fails(models_folder):
    with Served("--model", "hostile_models:Batched", cwd=models_folder) as served, ThreadPoolExecutor(4) as pool:
        held = pool.submit(chat, served, "hold", "batched")
        eventually(lambda: served.health()["running"] == 1)
        rest = {text: pool.submit(chat, served, text, "batched") for text in ("a", "segfault", "b")}
        eventually(lambda: served.health()["waiting"] == 3)
        (models_folder / "open").touch()  # the three then run as one batch, which the segfault ends
        assert held.result(timeout=60)[0] == 200
        answers = {text: future.result(timeout=120) for text, future in rest.items()}
        assert {text: status for text, (status, _) in answers.items()} == {"a": 200, "segfault": 500, "b": 200}
        assert "killed by SIGSEGV" in answers["segfault"][1]["error"]["message"]
        assert answers["a"][1]["choices"][0]["message"]["content"] == "fine: a"
        eventually(lambda: served.health()["status"] == "ok")
        assert served.health()["workers_replaced"] == 2 and served.health()["batches"] >= 3


@pytest.mark.parametrize("model", ["raising", "raising-in-worker"], ids=["thread", "worker process"])
@pytest.mark.parametrize("raised", ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "ValueError"])
def test_any_exception_from_model_code_is_that_requests_500_and_the_server_goes_on(models_folder, model, raised):
    name = "Raising" if model == "raising" else "RaisingInWorker"
    with Served("--model", f"hostile_models:{name}", cwd=models_folder) as served:
        status, answer = chat(served, raised, model)
        assert status == 500 and answer["error"]["message"].startswith(f"internal error: {raised}")
        assert chat(served, "hello", model)[1]["choices"][0]["message"]["content"] == "fine"
        assert served.health()["workers_replaced"] == 0
    assert served.proc.returncode == 0


@pytest.fixture(scope="module")
def malformed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("malformed")
    (folder / "hostile_models.py").write_text(textwrap.dedent(MODELS))
    with Served("--model", "hostile_models:Malformed", cwd=folder) as served:
        yield served


WRONG = {"int": "answered int, not str or Reply", "none": "answered NoneType, not str or Reply",
         "negative usage": "Reply.completion_tokens is -1, not a count", "usage not a number": "Reply.completion_tokens is '3', not a count",
         "usage true": "Reply.completion_tokens is True, not a count", "audio tokens over prompt": "Reply.audio_tokens (5) is more than prompt_tokens (2)",
         "text not a string": "Reply.text is int, not str", "lone surrogate": "Reply.text is not valid Unicode",
         "finish reason": "Reply.finish_reason is 'done'", "segment time": "segments[0].start is nan, not a finite number",
         "segment backwards": "segments[0] runs from 2 s to 1 s", "segment type": "segments[0] is str, not a Segment",
         "refusal status": "Malformed refused a request with status 200, not an error status"}


@pytest.mark.parametrize("case", WRONG)
def test_a_malformed_reply_is_a_500_model_bug_naming_what_is_wrong_never_a_200(malformed, case):
    status, answer = chat(malformed, case, "malformed")
    assert status == 500 and answer["error"]["message"].startswith("model bug: ") and WRONG[case] in answer["error"]["message"]
    assert chat(malformed, "hello", "malformed")[0] == 200


def test_a_batch_answered_with_the_wrong_number_of_replies_is_a_model_bug(models_folder):
    with Served("--model", "hostile_models:ShortBatch", cwd=models_folder) as served:
        status, answer = chat(served, "hello", "short-batch")
        assert status == 500 and answer["error"]["message"] == "model bug: ShortBatch answered 0 of a batch of 1"


def flac_of_silence(seconds: int, rate: int = 1000) -> bytes:
    out = io.BytesIO()
    with sf.SoundFile(out, "w", samplerate=rate, channels=1, format="FLAC", subtype="PCM_16") as handle:
        for start in range(0, seconds, 600):
            handle.write(np.zeros(rate * min(600, seconds - start), dtype="int16"))
    return out.getvalue()


def wav_claiming_1_hz(size: int = 60_000) -> bytes:
    frames = (size - 44) // 2
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + frames * 2, b"WAVE", b"fmt ", 16, 1, 1, 1, 2, 2, 16, b"data", frames * 2) + b"\1\0" * frames


def with_total_samples(flac: bytes, total: int) -> bytes:
    """The FLAC with STREAMINFO's 36-bit total-samples field set to `total` (a header that lies about its length)."""
    data = bytearray(flac)
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO first; its 36-bit count ends at byte 8 + 18
    head = int.from_bytes(data[8 + 10 : 8 + 18], "big")
    head = (head & ~((1 << 36) - 1)) | total
    data[8 + 10 : 8 + 18] = head.to_bytes(8, "big")
    return bytes(data)


def high_water_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


CLIPS = {
    "WAV header saying 1 Hz": (wav_claiming_1_hz, "its header says 29978.0 s"),
    "FLAC of 10 h of silence": (lambda: flac_of_silence(10 * 3600), "its header says 36000.0 s"),
    "FLAC header claiming 2^36 samples": (lambda: with_total_samples(flac_of_silence(600, 16000), (1 << 36) - 1), "its header says"),
    "FLAC header not giving its length": (lambda: with_total_samples(flac_of_silence(2 * 3600), 0), "decoding went past it"),
}


@pytest.fixture(scope="module")
def bounded(tmp_path_factory):
    with Served("--model", "echo", "--max-audio-seconds", "3000") as served:
        yield served


@pytest.mark.parametrize("case", CLIPS)
@pytest.mark.parametrize("route", ["chat", "transcriptions"])
def test_audio_over_max_audio_seconds_is_a_400_found_before_decoding(bounded, case, route):
    make, how = CLIPS[case]
    clip = make()
    if route == "chat":
        part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(clip).decode(), "format": "wav"}}
        body = json.dumps({"model": "echo-inputs", "messages": [{"role": "user", "content": [part]}]}).encode()
        status, _, answer = bounded.raw("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    else:
        boundary = "b0und"
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\n'.encode() + clip
                + f"\r\n--{boundary}--\r\n".encode())
        status, _, answer = bounded.raw("POST", "/v1/audio/transcriptions", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    message = json.loads(answer)["error"]["message"]
    assert status == 400 and "audio longer than this server takes (--max-audio-seconds 3000" in message and how in message, message
    assert high_water_mb(bounded.proc.pid) < 600  # decoded whole, the 1 Hz WAV alone costs gigabytes


def test_the_clips_of_one_request_share_max_audio_seconds(tmp_path):
    clip = base64.b64encode(flac_of_silence(60, 16000)).decode()  # one minute
    part = {"type": "input_audio", "input_audio": {"data": clip, "format": "flac"}}
    with Served("--model", "echo", "--max-audio-seconds", "90") as served:
        one = json.dumps({"model": "echo-inputs", "messages": [{"role": "user", "content": [part]}]}).encode()
        two = json.dumps({"model": "echo-inputs", "messages": [{"role": "user", "content": [part, part]}]}).encode()
        assert served.raw("POST", "/v1/chat/completions", one, {"Content-Type": "application/json"})[0] == 200
        status, _, answer = served.raw("POST", "/v1/chat/completions", two, {"Content-Type": "application/json"})
        assert status == 400 and "messages[0].content[1]" in json.loads(answer)["error"]["message"]


SECRET = "sk-survival-5e1d"


@pytest.fixture(scope="module")
def keyed():
    with Served("--model", "echo", "--api-key", SECRET) as served:
        yield served


def raw_request(served: Served, head: bytes) -> tuple[int, bytes]:
    port = int(served.url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + b"Host: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("header", [b"Authorization: Bearer sk-\xff\xfe\xe9", b"Authorization: Bearer \xc3\xa9t\xc3\xa9", b"api-key: \xe9\x80\x80"],
                         ids=["latin-1 bytes", "UTF-8 bearer", "api-key"])
def test_non_ascii_key_headers_are_a_401_not_a_500(keyed, header):
    status, body = raw_request(keyed, b"GET /v1/models HTTP/1.1\r\n" + header + b"\r\n")
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"


def test_the_key_sent_where_a_model_name_goes_is_never_echoed(keyed):
    auth = {"Authorization": f"Bearer {SECRET}"}
    status, answer = chat(keyed, "hi", SECRET, auth)
    assert status == 404 and SECRET not in json.dumps(answer) and "[the API key]" in answer["error"]["message"]
    status, _, raw = keyed.raw("GET", f"/v1/models/{SECRET}", headers=auth)
    assert status == 404 and SECRET.encode() not in raw
    status, answer = chat(keyed, "hi", f"prefix-{SECRET}", auth)
    assert status == 404 and SECRET not in json.dumps(answer)


REFUSED_AT_START = {
    "empty --api-key": (["--api-key", ""], {}, "error: --api-key is empty (an unset variable?): give the key, or leave --api-key out"),
    "empty key variable": ([], {"LALMEVAL_SERVE_API_KEY": ""}, "error: $LALMEVAL_SERVE_API_KEY is empty"),
    "key with a space": (["--api-key", "sk-x "], {}, "error: --api-key has spaces at its ends"),
    "max-wait-ms inf": (["--max-wait-ms", "inf"], {}, "error: --max-wait-ms must be a number from 0, not inf"),
    "max-wait-ms nan": (["--max-wait-ms", "nan"], {}, "error: --max-wait-ms must be a number from 0, not nan"),
    "max-wait-ms negative": (["--max-wait-ms", "-1"], {}, "error: --max-wait-ms must be a number from 0, not -1"),
    "empty served name": (["--served-model-name", ""], {}, "error: --served-model-name '' is not a model id clients can send (empty)"),
    "blank served name": (["--served-model-name", " "], {}, "error: --served-model-name ' ' is not a model id clients can send (empty)"),
    "max-audio-seconds 0": (["--max-audio-seconds", "0"], {}, "error: --max-audio-seconds must be a number above 0, not 0"),
    "max-audio-seconds inf": (["--max-audio-seconds", "inf"], {}, "error: --max-audio-seconds must be a number above 0, not inf"),
}


def serve_once(*args: str, cwd, env: dict = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "LALMEVAL_SERVE_API_KEY"}
    return subprocess.run([sys.executable, "-m", "lalmeval", "serve", "--port", "0", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**environment, **(env or {})})


@pytest.mark.parametrize("case", REFUSED_AT_START)
def test_an_argument_the_server_cannot_work_with_is_one_line_and_exit_2(tmp_path, case):
    args, env, said = REFUSED_AT_START[case]
    out = serve_once("--model", "echo", *args, cwd=tmp_path, env=env)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith(said), out.stderr


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "a worker in a batch"])
def test_sigterm_ends_every_worker_and_the_resource_tracker(models_folder, busy):
    served = Served("--model", "hostile_models:Pair", cwd=models_folder)
    try:
        with ThreadPoolExecutor(1) as pool:
            if busy:
                pool.submit(chat, served, "hold", "pair")
                eventually(lambda: served.health()["running"] == 1)
            children = descendants(served.proc.pid)
            assert len(children) >= 3  # two workers and the resource tracker
            served.proc.send_signal(signal.SIGTERM)
            assert served.proc.wait(30) == 0
            eventually(lambda: not any(alive(pid) for pid in children), 20)
    finally:
        served.close()


def test_a_server_killed_outright_takes_its_workers_with_it(models_folder):
    served = Served("--model", "hostile_models:Pair", cwd=models_folder)
    try:
        children = descendants(served.proc.pid)
        served.proc.kill()
        served.proc.wait(30)
        eventually(lambda: not any(alive(pid) for pid in children), 20)
    finally:
        served.close()


def test_sigterm_while_the_workers_load_the_model_ends_them_all(models_folder):
    server = subprocess.Popen([sys.executable, "-m", "lalmeval", "serve", "--port", "0", "--model", "hostile_models:Stuck"], cwd=models_folder,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: len(list(models_folder.glob("loading-*"))) == 2)  # both workers are in load()
        children = descendants(server.pid)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 130 and server.stderr.read().strip() == "interrupted"
        eventually(lambda: not any(alive(pid) for pid in children), 20)
    finally:
        server.kill()
        server.wait()


CLASS_MISTAKES = {
    "syntax error": ("def generate(self:\n", "bad:Model", "--model bad:Model: syntax error: '(' was never closed ({dir}/bad.py, line 1)"),
    "exception at import": ("import os\nraise ValueError('no config')\n", "bad:Model",
                            "--model bad:Model: importing bad raised ValueError: no config ({dir}/bad.py, line 2)"),
    "sys.exit at import": ("import sys\nsys.exit(3)\n", "bad:Model", "--model bad:Model: importing bad raised SystemExit: 3 ({dir}/bad.py, line 2)"),
    "missing package": ("import no_such_package_here\n", "bad:Model",
                        "--model bad:Model: it needs the Python package 'no_such_package_here', which is not installed ({dir}/bad.py, line 1)"),
    "load() raising": ("from lalmeval.serve import AudioModel\nclass Model(AudioModel):\n    name = 'm'\n    def load(self):\n"
                       "        raise RuntimeError('weights not found')\n", "bad:Model",
                       "--model bad:Model: load() raised RuntimeError: weights not found ({dir}/bad.py, line 5)"),
    "load() raising in a worker": ("from lalmeval.serve import AudioModel\nclass Model(AudioModel):\n    name = 'm'\n    processes = 1\n"
                                   "    def load(self):\n        raise RuntimeError('weights not found')\n", "bad:Model",
                                   "--model bad:Model: load() raised RuntimeError: weights not found ({dir}/bad.py, line 6)"),
    "__init__ raising": ("from lalmeval.serve import AudioModel\nclass Model(AudioModel):\n    name = 'm'\n    def __init__(self):\n"
                         "        raise KeyError('cfg')\n", "bad:Model", "--model bad:Model: Model() raised KeyError: 'cfg' ({dir}/bad.py, line 5)"),
    "name = None": ("from lalmeval.serve import AudioModel\nclass Model(AudioModel):\n    name = None\n", "bad:Model",
                    "--model bad:Model: Model.name is None, not a model id clients can send (a NoneType, not a string) ({dir}/bad.py, line 2)"),
    "empty name": ("from lalmeval.serve import AudioModel\nclass Model(AudioModel):\n    name = ''\n", "bad:Model",
                   "--model bad:Model: Model.name is '', not a model id clients can send (empty) ({dir}/bad.py, line 2)"),
    "processes as text": ("from lalmeval.serve import AudioModel\nclass Model(AudioModel):\n    processes = '2'\n", "bad:Model",
                          "--model bad:Model: Model.processes must be a whole number from 0, not '2' ({dir}/bad.py, line 2)"),
    "no such class": ("x = 1\n", "bad:Model", "--model bad:Model: bad has no class 'Model' ({dir}/bad.py)"),
    "not a model class": ("class Model:\n    pass\n", "bad:Model", "--model bad:Model: 'Model' in bad is not an AudioModel subclass"),
    "path out of the folder": ("", "../../x:Y", "--model ../../x:Y: no file '../../x.py' (give module:Class for a module on the path, or path/to/file.py:Class)"),
    "not a module name": ("", "my model:Y", ("--model my model:Y: 'my model' is not a module name: give module:Class (my_model:MyModel for my_model.py in the current "
                                        "folder) or path/to/file.py:Class")),
}


@pytest.mark.parametrize("case", CLASS_MISTAKES)
def test_a_mistake_in_the_users_model_class_is_one_line_naming_file_and_line_and_exit_2(tmp_path, case):
    source, spec, said = CLASS_MISTAKES[case]
    (tmp_path / "bad.py").write_text(source)
    out = serve_once("--model", spec, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == ["error: " + said.format(dir=tmp_path)], out.stderr
    assert "Traceback" not in out.stdout


def test_a_model_given_as_a_file_path_is_served(models_folder, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    with Served("--model", f"{models_folder}/hostile_models.py:Raising", cwd=elsewhere) as served:
        assert chat(served, "hello", "raising")[1]["choices"][0]["message"]["content"] == "fine"
