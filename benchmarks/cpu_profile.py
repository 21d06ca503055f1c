"""Where a lalmeval run's CPU goes: `lalmeval` run in-process under a sampling profiler of every thread's CPU clock.

    python benchmarks/cpu_profile.py OUT.json run --config ... [any lalmeval arguments]

Every SAMPLE_SECONDS a sampler thread reads each thread's CPU clock and charges the CPU that thread
used since the last sample to the stage its Python stack is in at that moment (the innermost frame
a rule in STAGES names; imports first, wherever they happen), or, when the thread is found waiting
for work, to the stage it was in at the sample before (its CPU went to that work, not to the wait). Unlike cProfile, whose per-call cost
inflates code made of many small Python calls (the event loop, scoring) several times over and
leaves C work (decoding, base64) as it is, sampling costs the same whatever runs, so the shares are
the run's own; the sampler's own CPU is charged to `profiler`. OUT.json gets {"stages": {stage: CPU seconds},
"functions": {innermost file:function: CPU seconds} of the busiest functions}.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
from types import FrameType
from typing import Optional

SAMPLE_SECONDS = 0.002
TOP_FUNCTIONS = 40

# (stage, path fragment, function names or None for any): the first rule, from the innermost frame
# outwards, that a frame matches names the stage. Library frames decide only where no lalmeval frame
# is nearer (json inside record writing is record writing).
STAGES: list[tuple[str, str, Optional[frozenset[str]]]] = [
    ("record writing", "lalmeval/results/store.py", frozenset({"json_line", "_write", "_write_all", "_run", "submit", "write"})),
    ("record writing", "lalmeval/results/records.py", frozenset({"to_json"})),
    ("record writing", "lalmeval/inference/job.py", frozenset({"_persist"})),
    ("redaction", "lalmeval/config/secrets.py", None),
    ("progress", "lalmeval/run/progress.py", None),
    ("progress", "rich/", None),
    ("bootstrap (intervals)", "lalmeval/stats.py", None),
    ("reports", "lalmeval/reports/", None),
    ("scoring", "lalmeval/metrics/", None),
    ("scoring", "lalmeval/run/engine.py", None),
    ("scoring", "lalmeval/judging/", None),
    ("scoring", "lalmeval/postprocess/", None),
    ("scoring", "whisper_normalizer/", None),
    ("scoring", "jiwer/", None),
    ("resample", "lalmeval/media/audio.py", frozenset({"_resampled"})),
    ("encode (PCM, WAV, base64)", "lalmeval/media/audio.py", frozenset({"to_pcm16", "wav_bytes", "b64", "encoded", "_gather"})),
    ("clip digest (SHA-1)", "lalmeval/media/audio.py", frozenset({"source_digest", "audio_identity"})),
    ("clip notes (report copies)", "lalmeval/results/clips.py", None),
    ("decode", "lalmeval/media/audio.py", None),
    ("decode", "lalmeval/data/containers.py", None),
    ("decode", "soundfile.py", None),
    ("request building", "lalmeval/inference/protocols.py", frozenset({"body", "splice", "part", "audio_part"})),
    ("request building", "lalmeval/data/messages.py", None),
    ("request building", "lalmeval/config/generation.py", None),
    ("reply JSON and parsing", "lalmeval/inference/client.py", frozenset({"_decode"})),
    ("reply JSON and parsing", "lalmeval/inference/protocols.py", None),
    ("HTTP", "lalmeval/inference/client.py", None),
    ("HTTP", "lalmeval/inference/http.py", None),
    ("HTTP", "aiohttp/", None),
    ("HTTP", "yarl/", None),
    ("HTTP", "multidict/", None),
    ("reading data", "lalmeval/data/", None),
    ("reading data", "pyarrow/", None),
    ("orchestration (feed, jobs, records)", "lalmeval/inference/", None),
    ("orchestration (feed, jobs, records)", "lalmeval/results/", None),
    ("orchestration (feed, jobs, records)", "lalmeval/run/", None),
    ("event loop", "asyncio/", None),
    ("hand-offs between threads", "concurrent/futures/", None),
    ("hand-offs between threads", "threading.py", None),
    ("hand-offs between threads", "queue.py", None),
    ("startup (config, plan, runspecs)", "lalmeval/", None),
]
IMPORTS = "<frozen importlib._bootstrap"
# Innermost frames of a thread waiting for work (an executor's worker, the record writer, a wait). CPU a
# thread used since the last sample and is found waiting at this one went to the work it did before it
# waited: it is charged to the stage of the previous sample, not to the wait.
IDLE = frozenset({("thread.py", "_worker"), ("store.py", "_run"), ("threading.py", "wait"), ("queue.py", "get")})


def stage_of(frame: Optional[FrameType]) -> str:
    """The stage a thread's stack is in: imports wherever they happen, else the innermost frame a rule names."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    if any(f.f_code.co_filename.startswith(IMPORTS) for f in frames):
        return "imports"
    for f in frames:
        path, name = f.f_code.co_filename.replace(os.sep, "/"), f.f_code.co_name
        for stage, fragment, names in STAGES:
            if fragment in path and (names is None or name in names):
                return stage
    return "other"


class Sampler:
    """Charges each thread's CPU (its own clock) to the stage its stack is in, every SAMPLE_SECONDS."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.functions: dict[str, float] = {}   # CPU by innermost frame (file:function), to look further
        self._last: dict[int, float] = {}
        self._doing: dict[int, tuple[str, str]] = {}   # thread -> (stage, function) at its last busy sample
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._done.set()
        self._thread.join()
        return self.seconds

    def _charge(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def _loop(self) -> None:
        me = threading.get_ident()
        own = time.thread_time()
        while not self._done.wait(SAMPLE_SECONDS):
            self._sample(me)
            now = time.thread_time()
            self._charge("profiler", now - own)
            own = now

    def _sample(self, me: int) -> None:
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            try:
                used = time.clock_gettime(time.pthread_getcpuclockid(ident))
            except (OSError, ProcessLookupError):  # the thread ended since the frames were taken
                continue
            spent = used - self._last.get(ident, 0.0)
            self._last[ident] = used
            where = (frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name)
            if where in IDLE:  # waiting now: what it used went to the work it was doing at the last sample
                stage, function = self._doing.pop(ident, ("hand-offs between threads", ":".join(where)))
            else:
                stage, function = stage_of(frame), ":".join(where)
                self._doing[ident] = (stage, function)
            if spent > 0:
                self._charge(stage, spent)
                self.functions[function] = self.functions.get(function, 0.0) + spent


def main() -> int:
    out, arguments = sys.argv[1], sys.argv[2:]
    sampler = Sampler()
    sampler.start()
    sys.argv = ["lalmeval", *arguments]
    code: object = 0
    try:
        runpy.run_module("lalmeval", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    finally:
        stages = sampler.stop()
        top = dict(sorted(sampler.functions.items(), key=lambda item: -item[1])[:TOP_FUNCTIONS])
        with open(out, "w") as handle:
            json.dump({"stages": stages, "functions": top}, handle)
    return code if isinstance(code, int) else 1


if __name__ == "__main__":
    sys.exit(main())
