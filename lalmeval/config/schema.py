"""The schema of config.yaml: every key, its meaning and its default."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Literal, Optional, Union
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from lalmeval.config.aliases import read_aliases
from lalmeval.config.generation import Generation
from lalmeval.config.interpolate import interpolate
from lalmeval.config.numbers import NoBooleanNumbers
from lalmeval.config.secrets import Redactor, raw_secrets
from lalmeval.errors import UserError, closest
from lalmeval.files import load_yaml


class Strict(NoBooleanNumbers):
    # Infinite or NaN numbers are never meaningful here (`timeout: .inf` would wait for ever).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


DAY = 86400.0


def check_url(value: str) -> str:
    """An http(s) URL with a host and a valid port, or a ValueError saying what is wrong."""
    if not isinstance(value, str) or any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise ValueError(f"{value!r} is not a URL (it contains spaces or control characters)")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{value!r} is not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError(f"{value!r} has no host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{value!r} has an invalid port (1-65535)") from None
    if port == 0:
        raise ValueError(f"{value!r} has an invalid port (1-65535)")
    return value


def check_header_value(value: Optional[Any]) -> Optional[Any]:
    """Tokens and versions travel in HTTP headers or the query: a newline or control character would break them."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if text is not None and any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise ValueError("contains a newline or control character (check how the value was pasted or exported)")
    if text is not None and text != text.strip():
        raise ValueError("has leading or trailing spaces")
    return value


def _plain_name(value: str) -> str:
    if not value.strip() or any(ord(ch) < 32 for ch in value):
        raise ValueError("must be a non-empty name without control characters")
    return value


class Filters(Strict):
    num_samples: Optional[int] = Field(None, gt=0, le=10**9, description="Evaluate at most this many samples per dataset (after the other filters).")
    shuffle: bool = Field(False, description="With num_samples: draw the samples at random with the run's seed instead of taking the first N.")
    length_filter: Optional[tuple[float, float]] = Field(None, description="[min_s, max_s]: keep only clips whose duration lies in this range.")
    language: Optional[str] = Field(None, description="Keep only datasets (and rows with a language column) in this language: ISO code or name.")
    accented: Optional[bool] = Field(None, description="true: only accented-speech datasets; false: only non-accented ones.")
    user_prompt_add_ons: list[str] = Field(default_factory=list, description="Names from the prompts file appended to every user instruction.")
    system_prompts: list[str] = Field(default_factory=list, description="Names from the prompts file joined into the system message.")

    @field_validator("length_filter")
    @classmethod
    def _ordered(cls, value: Optional[tuple[float, float]]) -> Optional[tuple[float, float]]:
        if value is not None and not (0 <= value[0] <= value[1]):
            raise ValueError("length_filter must be [min_s, max_s] with 0 <= min_s <= max_s")
        return value


class Price(Strict):
    input_per_mtok: float = Field(ge=0, le=1e6, allow_inf_nan=False, description="Price of a million prompt tokens (text, and audio unless audio_input_per_mtok is set).")
    output_per_mtok: float = Field(ge=0, le=1e6, allow_inf_nan=False, description="Price of a million completion tokens (text, and audio unless audio_output_per_mtok is set).")
    audio_input_per_mtok: Optional[float] = Field(None, ge=0, le=1e6, allow_inf_nan=False, description="Price of a million prompt audio tokens (usage.prompt_tokens_details.audio_tokens), when it differs from input_per_mtok.")
    audio_output_per_mtok: Optional[float] = Field(None, ge=0, le=1e6, allow_inf_nan=False, description="Price of a million completion audio tokens (usage.completion_tokens_details.audio_tokens), when it differs from output_per_mtok.")


class AudioReply(Strict):
    voice: str = Field("alloy", min_length=1, description="The voice the model speaks in (a name the endpoint knows: OpenAI's alloy, echo, ..., or the server's own).")
    format: Literal["wav", "mp3", "flac", "opus", "pcm16"] = Field("wav", description="Audio format of the reply (OpenAI's names); a streamed chat reply comes as pcm16 (24 kHz 16-bit mono), which is stored as WAV.")


class ModelInfo(Strict):
    name: str = Field(description="Name of this model in reports and file names. Different names are different models, even with one model id; entries sharing a name are replicas of one model.")
    inference_type: Literal["openai", "vllm", "transcription", "speech"] = Field("openai", description="openai / vllm: POST {url}/chat/completions; transcription: POST {url}/audio/transcriptions; speech: POST {url}/audio/speech (text to speech: the prompt's text is the input, audio.voice and audio.format the voice and response_format).")
    url: Union[str, list[str]] = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; a list of URLs serves the model from several replicas; with launch, http://127.0.0.1:{port}/v1 takes a free port picked at run time.")
    model: str = Field(min_length=1, description="Model id sent in the request body.")
    auth_token: Optional[SecretStr] = Field(None, description="Bearer token (or Azure api-key when api_version is set). Never written to any file.")
    api_version: Optional[str] = Field(None, description="Azure style: sends the token as an api-key header and api-version as a query parameter; a url that is an Azure resource root goes to /openai/deployments/<model>.")
    delay: float = Field(0.0, ge=0, le=600_000, description="Minimum spacing between request starts on this endpoint, in milliseconds (at most 10 minutes).")
    retry_attempts: int = Field(3, ge=0, le=100, description="Retries after the first attempt for transient failures (connection errors, timeouts, malformed replies, 408/409/429/5xx), after the wait the server asks for (Retry-After and its gateway forms, at most 300 s) or a backoff.")
    timeout: float = Field(120.0, gt=0, le=DAY, description="Seconds before one attempt is abandoned (at most a day).")
    batch_size: int = Field(8, ge=1, le=10_000, description="Maximum requests in flight to this endpoint, shared by every Engine.")
    chunk_size: Optional[float] = Field(None, ge=1.0, le=DAY, description="Maximum seconds of audio per request (at least 1); what happens to longer audio is long_audio.")
    long_audio: Literal["chunk", "truncate", "vad"] = Field("chunk", description="Audio longer than chunk_size: chunk (fixed cuts, outputs joined in order), truncate (the first chunk_size seconds only), vad (cuts in silences, outputs joined in order); a runspec may override.")
    replicas: int = Field(1, ge=1, le=256, description="Serve this entry from N replicas on consecutive ports, starting at the url's port, or on N free ports when url uses {port} (with launch: N servers, {replica} and {port} filled in).")
    launch: Optional[str] = Field(None, description="Shell command that serves this endpoint (e.g. lalmeval serve --model whisper-tiny.en --port {port}); started before the run with this environment's lalmeval and python first on PATH, awaited until it answers, stopped at the end. {port} is the url's port, {replica} the replica's index (0, 1, ...).")
    launch_timeout: float = Field(600.0, gt=0, le=DAY, description="Seconds to wait for a launched endpoint to answer.")
    temperature: float = Field(0.0, ge=0, le=2.0, description="Sampling temperature (0-2, the OpenAI range) unless a temperature_overrides entry is more specific.")
    max_tokens: Optional[int] = Field(None, gt=0, le=10_000_000, description="max_tokens sent with each chat request (omitted when unset).")
    audio_format: Literal["input_audio", "audio_url"] = Field("input_audio", description="How audio is attached to chat requests: an input_audio part or an audio_url data URI.")
    max_reply_mb: float = Field(16.0, gt=0, le=1024, description="Largest reply body accepted, in MB; a larger reply fails its sample instead of exhausting memory.")
    generation_kwargs: Generation = Field(default_factory=Generation, description="Further sampling settings for this model (top_p, seed, stop, penalties, extra_body, ...); runspecs and overrides may refine them.")
    verify_ssl: bool = Field(True, description="Verify the endpoint's TLS certificate; false accepts any certificate (internal https endpoints with self-signed certificates).")
    price: Optional[Price] = Field(None, description="What this model's tokens cost, per million (the server's reported usage): gives each score's and the run's cost in final_scores.json, and lets max_cost stop the run.")
    modalities: list[Literal["text", "audio"]] = Field(default_factory=lambda: ["text"], min_length=1, description="What the chat reply holds: [\"text\", \"audio\"] asks for a spoken reply as OpenAI's API takes it; its audio is stored in the run folder (the record's audio_path), its text part is the reply.")
    audio: Optional[AudioReply] = Field(None, description="{voice, format} of a spoken reply (modalities audio, or inference_type speech); unset: alloy, wav.")
    stream: bool = Field(False, description="Stream the reply (server-sent events): records then hold ttft, ttfa (seconds to the first token and the first audio) and tokens_per_second.")
    max_audio_mb: float = Field(32.0, gt=0, le=1024, description="Largest spoken reply stored, in MB; a larger one fails its sample, naming this key.")

    @field_validator("url")
    @classmethod
    def _url(cls, value: Union[str, list[str]]) -> Union[str, list[str]]:
        if isinstance(value, list):
            if not value:
                raise ValueError("a list of URLs must hold at least one")
            if len(set(value)) != len(value):
                raise ValueError("a URL is listed twice")
            if any("{port}" in v for v in value if isinstance(v, str)):
                raise ValueError("{port} (a free port picked at run time) goes in a single url; use replicas: N for several")
            return [check_url(v) for v in value]
        if isinstance(value, str) and "{port}" in value:
            if value.count("{port}") > 1 or not re.search(r"^[a-z]+://[^/]*:\{port\}(/|$)", value):
                raise ValueError(f"{value!r}: {{port}} stands for the port, as in http://127.0.0.1:{{port}}/v1")
            check_url(value.replace("{port}", "1"))
            return value
        return check_url(value)

    @model_validator(mode="after")
    def _replicas(self) -> "ModelInfo":
        if isinstance(self.url, str) and "{port}" in self.url:
            if not self.launch or "{port}" not in self.launch:
                raise ValueError("url uses {port} (a free port picked at run time): give a launch command that uses {port} too, so the server listens there")
            return self
        if self.replicas > 1 and isinstance(self.url, list):
            raise ValueError("give either a list of URLs or replicas: N with one URL (its port is the first replica's), not both")
        if self.replicas > 1 and urlsplit(self.url).port is None:
            raise ValueError("replicas: N needs an explicit port in url (the first replica's; the others count up from it)")
        if self.replicas > 1 and self.launch and "{port}" not in self.launch:
            raise ValueError("with replicas and launch, the launch command must use {port} (every replica needs its own port)")
        if self.replicas > 1 and urlsplit(self.url).port + self.replicas - 1 > 65535:
            raise ValueError("replicas would need ports above 65535")
        return self

    def replica_urls(self) -> list[str]:
        """The URL of each replica: the listed ones, or the url's port counted up `replicas` times."""
        if isinstance(self.url, list):
            return list(self.url)
        if self.replicas == 1 or "{port}" in self.url:
            return [self.url] * self.replicas
        parts = urlsplit(self.url)
        host = parts.hostname if ":" not in (parts.hostname or "") else f"[{parts.hostname}]"
        netloc = (parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else "") + host
        return [urlunsplit(parts._replace(netloc=f"{netloc}:{parts.port + i}")) for i in range(self.replicas)]

    @field_validator("auth_token", "api_version")
    @classmethod
    def _header(cls, value: Any) -> Any:
        return check_header_value(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _plain_name(value)

    @property
    def speaks(self) -> bool:
        """Whether its replies are speech: a chat reply with modalities audio, or a text-to-speech endpoint."""
        return "audio" in self.modalities or self.inference_type == "speech"

    @property
    def spoken(self) -> AudioReply:
        """The voice and format asked of a spoken reply."""
        return self.audio or AudioReply()

    @model_validator(mode="after")
    def _voice(self) -> "ModelInfo":
        chat = self.inference_type in ("openai", "vllm")
        if "audio" in self.modalities and not chat:
            raise ValueError(f"modalities: audio is a chat reply's; inference_type {self.inference_type} cannot ask for it (speech endpoints always answer in audio)")
        if self.audio is not None and not self.speaks:
            raise ValueError('audio (voice, format) applies to spoken replies: add modalities: ["text", "audio"], or drop it')
        if chat and self.stream and "audio" in self.modalities and self.spoken.format != "pcm16":
            raise ValueError("stream: true with modalities audio: a streamed spoken reply comes as pcm16 deltas; set audio.format: pcm16")
        return self

    @model_validator(mode="before")
    @classmethod
    def _unwrap_info(cls, data: Any) -> Any:
        # The documented layout is `- info: {...}`; a flat mapping is accepted too.
        if isinstance(data, dict) and set(data) == {"info"}:
            return data["info"]
        return data


# What a transcription request of a spoken reply uses; a model entry's other keys are refused under transcriber.
TRANSCRIBER_KEYS = frozenset({"name", "inference_type", "url", "model", "auth_token", "timeout", "retry_attempts", "batch_size",
                              "launch", "launch_timeout"})


class TranscriberInfo(ModelInfo):
    """The endpoint that transcribes spoken replies for speech_wer and speech_consistency: a model entry's fields."""

    name: str = Field("transcriber", description="Name of the transcriber in messages and its launch log.")
    inference_type: Literal["transcription"] = Field("transcription", description="Always transcription: POST {url}/audio/transcriptions.")

    @model_validator(mode="after")
    def _applies(self) -> "TranscriberInfo":
        given = sorted(self.model_fields_set - TRANSCRIBER_KEYS)
        if given:
            raise ValueError(f"{given[0]} does not apply to a transcriber, whose request sends one reply file, the model id and the "
                             f"language (its keys: {', '.join(sorted(TRANSCRIBER_KEYS))}); drop it")
        return self


class TemperatureOverride(Strict):
    model: Optional[str] = Field(None, description="Model name this override applies to (any model when unset).")
    task: Optional[str] = Field(None, description="Dataset, task type or category this override applies to (any when unset).")
    temperature: float = Field(ge=0, le=2.0, description="The temperature to use (0-2).")

    @model_validator(mode="after")
    def _has_target(self) -> "TemperatureOverride":
        if self.model is None and self.task is None:
            raise ValueError("a temperature override needs 'model', 'task' or both")
        return self


class GenerationOverride(Generation):
    """Generation settings for a model, a task, or both (the most specific entry wins per setting)."""

    model: Optional[str] = Field(None, description="Model name this override applies to (any model when unset).")
    task: Optional[str] = Field(None, description="Dataset, task type or category this override applies to (any when unset).")

    @model_validator(mode="after")
    def _has_target(self) -> "GenerationOverride":
        if self.model is None and self.task is None:
            raise ValueError("a generation override needs 'model', 'task' or both")
        return self


class PromptRule(Strict):
    """Prompts chosen by model, task and dataset language (Kimi's per-model prompts, Twinkle's per-language map)."""

    model: Optional[str] = Field(None, description="Model name the rule applies to (any when unset).")
    task: Optional[str] = Field(None, description="Dataset, task type or category the rule applies to (any when unset).")
    language: Optional[str] = Field(None, description="Dataset language the rule applies to: ISO code or name (any when unset).")
    system_prompts: Optional[list[str]] = Field(None, description="Names from the prompts file for the system message (replaces filters.system_prompts).")
    user_prompt_add_ons: Optional[list[str]] = Field(None, description="Names from the prompts file appended to the instruction (replaces filters.user_prompt_add_ons).")
    instruction: Optional[str] = Field(None, description="The instruction to send instead of the runspec's default (a row's own instruction still wins).")
    mc_template: Optional[str] = Field(None, description="Name of the multiple-choice template (prompts file section mc_templates).")


class JudgeProperties(Strict):
    judge_model: str = Field(min_length=1, description="Model id of the judge.")
    judge_type: Literal["openai", "vllm"] = Field("openai", description="Chat-completions API of the judge endpoint.")
    judge_api_endpoint: str = Field(description="Base URL of the judge API, e.g. https://api.openai.com/v1.")
    judge_api_key: Optional[SecretStr] = Field(None, description="Judge API key (Bearer, or Azure api-key with judge_api_version). Never written to any file.")
    judge_api_version: Optional[str] = Field(None, description="Azure style api-version for the judge endpoint.")
    judge_concurrency: int = Field(8, ge=1, le=10_000, description="Maximum judge requests in flight.")
    judge_temperature: float = Field(0.0, ge=0, le=2.0, description="Judge sampling temperature (0-2); a judge template that fixes its own wins.")
    judge_prompt_model_override: Optional[str] = Field(None, description="Default judge template: use the prompt variant tuned for this model instead of judge_model's (a variant that exists in judge_prompts).")
    judge_timeout: float = Field(120.0, gt=0, le=DAY, description="Seconds per judge attempt.")
    judge_retry_attempts: int = Field(5, ge=0, le=100, description="Retries of a judge request on transient failures.")
    judge_max_tokens: Optional[int] = Field(None, gt=0, le=10_000_000, description="max_tokens for judge replies (omitted when unset); a judge template that fixes its own wins.")
    judge_verify_ssl: bool = Field(True, description="Verify the judge endpoint's TLS certificate; false accepts any certificate (self-signed).")
    judge_price: Optional[Price] = Field(None, description="What the judge's tokens cost, per million: its calls count in the run's cost and against max_cost.")

    @field_validator("judge_api_endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)

    @field_validator("judge_api_key", "judge_api_version")
    @classmethod
    def _header(cls, value: Any) -> Any:
        return check_header_value(value)

    def as_model(self) -> "ModelInfo":
        """The judge as an endpoint entry, so it shares the model client machinery."""
        return ModelInfo(
            name=f"judge:{self.judge_model}", inference_type=self.judge_type, url=self.judge_api_endpoint,
            model=self.judge_model, auth_token=self.judge_api_key, api_version=self.judge_api_version,
            batch_size=self.judge_concurrency, retry_attempts=self.judge_retry_attempts,
            timeout=self.judge_timeout, temperature=self.judge_temperature, max_tokens=self.judge_max_tokens,
            verify_ssl=self.judge_verify_ssl,
        )


class Config(Strict):
    dataset_metric: list[tuple[str, str]] = Field(min_length=1, description="[name, metric] pairs; name is a dataset, task type or category; metric 'all' means the runspec's metrics.")
    filters: Filters = Field(default_factory=Filters, description="Sample selection and prompt additions.")
    aggregate: list[tuple[str, list[str]]] = Field(default_factory=list, description="[metric, [names...]]: the pooled score (statistics summed over every sample), the sample-weighted and the unweighted mean over datasets, task types or categories.")
    temperature_overrides: list[TemperatureOverride] = Field(default_factory=list, description="Temperatures by model, by task, or both; the most specific wins.")
    generation_overrides: list[GenerationOverride] = Field(default_factory=list, description="Any generation setting by model, by task, or both: model+task > task > runspec generation_kwargs > model.")
    prompt_rules: list[PromptRule] = Field(default_factory=list, description="System prompts, add-ons, instructions and MC templates by model, task and language; more specific rules win.")
    shuffle_options: bool = Field(False, description="Multiple choice: permute each sample's options with the run's seed (differently per repeat); a runspec may override.")
    reading: Literal["verbatim", "careful", "judge"] = Field("careful", description="How replies are read before word_error_rate, bleu, chrf and label accuracy score them (docs/reading.md): careful (the transcript, translation or label a careful grader reads), verbatim (the reply as it is), judge (the judge picks the span or label); a runspec's reading, or its protocol's, wins.")
    repeat_runs: int = Field(1, ge=1, le=100, description="Ask every sample this many times; scores are the mean over repeats, with details.repeats and details.std; a runspec may override.")
    models: list[ModelInfo] = Field(min_length=1, description="The endpoints to evaluate.")
    runspec_dirs: list[str] = Field(default_factory=list, description="Extra folders of runspec JSON files (relative to this config file).")
    dataset_paths: dict[str, str] = Field(default_factory=dict, description="Dataset name → its data file or folder (relative to this config file), instead of the runspec's hf_repo (Kimi-Audio-Evalkit's DATASETS.datasets map).")
    datasets: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Datasets declared in the config itself: name → a runspec entry (the fields of a runspec file's entries, validated alike; relative paths start at this config file's folder). `lalmeval run --hf-dataset` declares one here.")
    dataset_root: Optional[str] = Field(None, description="Kimi-Audio-Evalkit's DATASETS.dataset_root (relative to this config file): format kimi datasets are found in it as Kimi finds them, and their relative audio paths start there.")
    allowed_data_dirs: list[str] = Field(default_factory=list, description="Folders (relative to this config file) in which a dataset's rows may also name local files (audio, images), besides the dataset's own folder; links are resolved first, and /proc, /sys and /dev are never read.")
    prompts_file: Optional[str] = Field(None, description="YAML file adding or overriding system prompts and user prompt add-ons.")
    streaming: bool = Field(False, description="Stream hub datasets instead of downloading them whole.")
    max_audio_seconds: float = Field(3600.0, ge=1, le=DAY, description="Longest clip a sample may decode, in seconds (16 kHz PCM costs 115 MB an hour): a longer clip fails its sample, with a reason naming this limit, before it is decoded whole; with long_audio: truncate only the first chunk_size seconds are decoded.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed for sampling (filters.shuffle) and for the bootstrap of score intervals and comparisons.")
    bootstrap_resamples: int = Field(1000, ge=0, le=100_000, description="Bootstrap resamples behind each score's ci95/stderr and each paired comparison between models; 0 turns intervals and comparisons off.")
    output_dir: str = Field("run_logs", description="Where run directories are written (relative to the working directory).")
    cache_dir: Optional[str] = Field(None, description="Folder of the inference cache, relative to the working directory (default: <output_dir>/.cache).")
    cache: bool = Field(False, description="Answer identical requests from the replies of earlier runs (the inference cache in cache_dir), judgments too; `lalmeval run --cache` turns it on for one run, --no-cache off. Off by default: a redeployed model behind the same URL and model id would get yesterday's answers.")
    max_failure_rate: Optional[float] = Field(None, ge=0, le=1, description="Stop the run when more than this share (0-1) of the samples finished so far failed, checked once 20 samples have finished; null: never stop for failures.")
    max_cost: Optional[float] = Field(None, gt=0, le=1e9, allow_inf_nan=False, description="Stop the run cleanly once its cost (models and judge, from the servers' reported usage and each `price`) reaches this; samples not yet sent are recorded as not run and a resume (after raising the limit) continues. Needs a price for every model (and the judge).")
    max_run_tokens: Optional[int] = Field(None, gt=0, le=10**15, description="Stop the run cleanly once the tokens it used (prompt plus completion, models and judge, as the servers report them) reach this; as max_cost. Not the per-request max_tokens of a model.")
    cache_sampled: bool = Field(False, description="Also reuse cached replies (and judgments) of requests sampled at temperature > 0 without a seed.")
    judge_properties: Optional[JudgeProperties] = Field(None, description="The LLM judge used by llm_judge_* metrics.")
    transcriber: Optional[TranscriberInfo] = Field(None, description="The speech recognizer that transcribes spoken replies for speech_wer and speech_consistency: the fields of a model's info (url, model, launch, ...), e.g. a launched `lalmeval serve --model whisper-tiny.en`.")

    @model_validator(mode="after")
    def _cross_checks(self) -> "Config":
        names = [m.name for m in self.models]
        for kind, entries in (("temperature_overrides", self.temperature_overrides), ("generation_overrides", self.generation_overrides), ("prompt_rules", self.prompt_rules)):
            for entry in entries:
                if entry.model is not None and entry.model not in names:
                    raise ValueError(f"{kind} names unknown model '{entry.model}'{closest(entry.model, names)}")
        if self.max_cost is not None:
            unpriced = [m.name for m in self.models if m.price is None]
            if unpriced:
                raise ValueError(f"max_cost needs a price for every model: give model '{unpriced[0]}' "
                                 "price: {input_per_mtok: ..., output_per_mtok: ...}")
            if self.judge_properties is not None and self.judge_properties.judge_price is None:
                raise ValueError("max_cost needs the judge's price too: give judge_properties.judge_price: {input_per_mtok: ..., output_per_mtok: ...}")
        return self


def _loc_text(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _model_at(loc: tuple) -> Optional[type[BaseModel]]:
    """The pydantic model whose fields are valid at `loc` (for suggesting a key)."""
    current: Any = Config
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(part)
        if field is None:
            return None
        annotation = field.annotation
        inner = [a for a in getattr(annotation, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else (inner[0] if inner else None)
    return current


_SECRET_FIELDS = {"auth_token", "judge_api_key"}


def _describe(err: dict, source: str) -> str:
    loc = tuple(p for p in err["loc"] if p not in ("info",) and not str(p).startswith("function-"))
    where = _loc_text(loc)
    if err["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        hint = closest(str(loc[-1]), parent.model_fields) if parent else ""
        return f"{source}: unknown key '{where}'{hint}"
    if err["type"] == "missing":
        return f"{source}: missing required key '{where}'"
    message = err["msg"].removeprefix("Value error, ")
    # Never echo a secret back, not even in an error message.
    shown = "input" in err and not isinstance(err["input"], (dict, list)) and not (set(map(str, loc)) & _SECRET_FIELDS)
    return f"{source}: {where or 'config'}: {message}" + (f" (got {err['input']!r})" if shown else "")


def parse_config(raw: Any, source: str = "config", missing: Optional[dict[str, Any]] = None) -> Config:
    """Validate an already-loaded mapping as a Config; errors name the key. AU-Harness's key names are
    read as lalmeval's, each with one note line on stderr. `missing` gives keys the mapping may leave
    out (what the command line supplies: a config of models only, run with --hf-dataset)."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: expected a mapping of keys at the top level")
    raw = interpolate(raw, source)
    raw, notes = read_aliases(raw, source)
    raw = {**(missing or {}), **raw}
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        # A misspelt key also makes its correct spelling "missing": report the misspelling.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        # A message may quote a value (an invalid URL) that holds a token: scrub the config's secrets from it.
        raise UserError(Redactor(raw_secrets(raw))(_describe(errors[0], source))) from None
    judge = config.judge_properties
    if judge is not None and "judge_type" in judge.model_fields_set:
        # Kept so that LALMEval and AU-Harness configs load; it cannot change a judge request, and says so.
        notes.append(f"note: {source}: judge_properties.judge_type changes nothing: openai and vllm judges are asked the same way "
                     f"(POST {{judge_api_endpoint}}/chat/completions; judge_api_version makes it Azure style); the key can be dropped")
    for note in notes:
        print(note, file=sys.stderr)
    return config


def load_config(path: str | Path, missing: Optional[dict[str, Any]] = None) -> Config:
    """Read, interpolate and validate a config file (`missing`: keys it may leave out, see parse_config)."""
    if not Path(path).exists():
        raise UserError(f"{path}: config file not found (lalmeval init writes a starter config.yaml into the current folder, lalmeval init --demo the demo's; "
                        "or name one with --config)")
    return parse_config(load_yaml(Path(path), "config file"), str(path), missing)
