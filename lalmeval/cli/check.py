"""`lalmeval check`: one real, tiny request to every endpoint of a config — each replica of each model, and
the judge — so a wrong key, a URL without /v1 or a model id the server does not know shows before a run.

Servers a model `launch`es are started as a run starts them, checked, and stopped. A chat model is asked
a short question (with a short clip when the config's datasets send audio), a transcription endpoint
is sent the clip; the judge gets a short text prompt.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from lalmeval.catalog import bundled
from lalmeval.config.schema import ModelInfo
from lalmeval.config.secrets import Redactor, config_secrets, redacted_errors
from lalmeval.errors import LaunchFailed
from lalmeval.files import check_writable_dir
from lalmeval.inference.client import Endpoint, RequestFailed
from lalmeval.inference.diagnose import fix_for
from lalmeval.inference.launch import Launcher, launch_list
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.media.audio import TARGET_RATE, PreparedAudio, prepare
from lalmeval.results.records import Prompt
from lalmeval.run.plan import Plan

QUESTION = "Say hello in a few words."
JUDGE_QUESTION = "Reply with the single word OK."
CHECK_MAX_TOKENS = 32
CHECK_RETRIES = 1   # a server still warming up may refuse once; more would only delay the answer
_BUNDLED_CLIP = bundled.DEMO_COMMANDS / "audio"


@dataclass(frozen=True)
class Probe:
    """One endpoint to check: what to call it and the request to send."""

    label: str
    info: ModelInfo
    prompt: Prompt
    params: dict[str, Any]
    language: str


@dataclass(frozen=True)
class Outcome:
    probe: Probe
    shown_url: str
    ok: bool
    text: str   # the reply's first words, or the failure and its likely fix
    latency: float = 0.0


def check_clip() -> PreparedAudio:
    """A short clip to send: a bundled spoken command when the demo data is there, else a second of quiet noise."""
    clips = sorted(p for p in _BUNDLED_CLIP.iterdir() if p.suffix in (".flac", ".wav")) if _BUNDLED_CLIP.is_dir() else []
    if clips:
        return prepare(str(clips[0]))
    noise = (np.random.default_rng(0).standard_normal(TARGET_RATE) * 30).astype(np.int16)
    return PreparedAudio(noise, "generated-noise").encoded()


def probes(plan: Plan) -> list[Probe]:
    """Every replica of every model, then the judge, with the tiny request each gets."""
    datasets = plan.datasets
    audio = any(d.spec.modality in ("audio", "audio_text") for d in datasets)
    language = datasets[0].iso_language if datasets else "en"
    out = []
    for group in plan.groups:
        entry = next(m for m in plan.config.models if m.name == group.name)
        params = dict(plan.params(entry, datasets[0])) if datasets else {"temperature": entry.temperature}
        transcription = group.info.inference_type == "transcription"
        if not transcription:
            params["max_tokens"] = CHECK_MAX_TOKENS
        speech = group.info.inference_type == "speech"   # text to speech: the question is said, no clip is sent
        prompt = Prompt(text="" if transcription else QUESTION, with_audio=(audio or transcription) and not speech)
        for replica in group.replicas:
            label = f"{group.name} ({replica.info.url})" if len(group.replicas) > 1 else group.name
            out.append(Probe(label, replica.info, prompt, params, language))
    props = plan.config.judge_properties
    if props is not None:
        judge = props.as_model()
        params = {"temperature": props.judge_temperature, "max_tokens": CHECK_MAX_TOKENS}
        out.append(Probe(f"judge {props.judge_model}", judge, Prompt(text=JUDGE_QUESTION, with_audio=False), params, "en"))
    return out


def _first_words(text: str, count: int = 12) -> str:
    words = text.split()
    return " ".join(words[:count]) + (" …" if len(words) > count else "")


async def _probe(probe: Probe, clip: Optional[PreparedAudio], redact: Redactor) -> Outcome:
    info = probe.info.model_copy(update={"retry_attempts": min(probe.info.retry_attempts, CHECK_RETRIES)})
    endpoint = Endpoint(info, redact)
    protocol = PROTOCOLS.get(info.inference_type)
    body, content_type = protocol.body(info, probe.prompt, [clip] if probe.prompt.with_audio and clip else [], probe.params, probe.language)
    await endpoint.open()
    try:
        reply = await endpoint.post(protocol.path, body, content_type, protocol.parse, protocol.reads)
    except RequestFailed as exc:
        fix = fix_for(exc.reason, endpoint.shown_url, info)
        where = f"POST {endpoint.shown_url.rstrip('/')}{protocol.path}"
        return Outcome(probe, endpoint.shown_url, False, f"{exc.reason} ({where})" + (f" — {fix}" if fix else ""))
    finally:
        await endpoint.close()
    said = reply.value.audio
    heard = f"{len(said.data):,} bytes of audio" if said is not None and isinstance(said.data, bytes) else ""
    return Outcome(probe, endpoint.shown_url, True, _first_words(reply.value.text) or heard or "(an empty reply)", reply.latency)


async def check_all(plan: Plan, logdir: Path, redact: Redactor) -> list[Outcome]:
    """Launch what the config launches, send every probe at once, stop what was launched."""
    checks = probes(plan)
    loop = asyncio.get_running_loop()
    clip = await loop.run_in_executor(None, check_clip) if any(p.prompt.with_audio for p in checks) else None
    launches = {m.url: m for m in launch_list(plan.groups)}

    async def checked(url: str, group: list[Probe]) -> list[Outcome]:
        """The probes of one URL, its server launched first when the config launches it; a failed launch fails them alone."""
        if url not in launches:
            return list(await asyncio.gather(*(_probe(p, clip, redact) for p in group)))
        try:
            async with Launcher([launches[url]], plan.base, logdir, redact):
                return list(await asyncio.gather(*(_probe(p, clip, redact) for p in group)))
        except LaunchFailed as exc:
            return [Outcome(p, Endpoint(p.info, redact).shown_url, False, redact(str(exc))) for p in group]

    by_url: dict[str, list[Probe]] = {}
    for probe in checks:
        by_url.setdefault(probe.info.url, []).append(probe)
    done = await asyncio.gather(*(checked(url, group) for url, group in by_url.items()))
    outcome = {id(o.probe): o for group in done for o in group}
    return [outcome[id(p)] for p in checks]


def line(outcome: Outcome) -> str:
    """'OK    m  http://…/v1  0.21 s  "Hello there"' or 'FAIL  m  http://…/v1  HTTP 401: … — check auth_token …'."""
    if outcome.ok:
        return f"OK    {outcome.probe.label}  {outcome.shown_url}  {outcome.latency:.2f} s  \"{outcome.text}\""
    return f"FAIL  {outcome.probe.label}  {outcome.shown_url}  {outcome.text}"


def run_check(plan: Plan, logdir: Path) -> tuple[list[str], bool]:
    """The printed lines of a check, and whether every endpoint answered."""
    redact = Redactor(config_secrets(plan.config))
    if launch_list(plan.groups):
        check_writable_dir(logdir, "launch log folder")
    with redacted_errors(redact):
        outcomes = asyncio.run(check_all(plan, logdir, redact))
    return [redact(line(o)) for o in outcomes], all(o.ok for o in outcomes)
