"""The schema of config.yaml: every key, its meaning and its default."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from lalmeval.errors import UserError, closest


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Filters(Strict):
    num_samples: Optional[int] = Field(None, gt=0, description="Evaluate at most this many samples per dataset (after the other filters).")
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


class ModelInfo(Strict):
    name: str = Field(description="Unique name of this model entry, used in reports and file names.")
    inference_type: Literal["openai", "vllm", "transcription"] = Field("openai", description="openai / vllm: POST {url}/chat/completions; transcription: POST {url}/audio/transcriptions.")
    url: str = Field(description="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1.")
    model: str = Field(description="Model id sent in the request body.")
    auth_token: Optional[SecretStr] = Field(None, description="Bearer token (or Azure api-key when api_version is set). Never written to any file.")
    api_version: Optional[str] = Field(None, description="Azure style: sends the token as an api-key header and api-version as a query parameter.")
    delay: float = Field(0.0, ge=0, description="Minimum spacing between request starts on this endpoint, in milliseconds.")
    retry_attempts: int = Field(3, ge=0, description="Retries after the first attempt for transient failures (connection errors, timeouts, 408/409/429/5xx).")
    timeout: float = Field(120.0, gt=0, description="Seconds before one attempt is abandoned.")
    batch_size: int = Field(8, ge=1, description="Maximum requests in flight to this endpoint, shared by every Engine.")
    chunk_size: Optional[float] = Field(None, gt=0, description="Maximum seconds of audio per request; longer audio is split and the outputs joined in order.")
    launch: Optional[str] = Field(None, description="Shell command that serves this endpoint; started before the run, awaited until it answers, stopped at the end.")
    launch_timeout: float = Field(600.0, gt=0, description="Seconds to wait for a launched endpoint to answer.")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature unless a temperature_overrides entry is more specific.")
    max_tokens: Optional[int] = Field(None, gt=0, description="max_tokens sent with each chat request (omitted when unset).")
    audio_format: Literal["input_audio", "audio_url"] = Field("input_audio", description="How audio is attached to chat requests: an input_audio part or an audio_url data URI.")

    @model_validator(mode="before")
    @classmethod
    def _unwrap_info(cls, data: Any) -> Any:
        # The documented layout is `- info: {...}`; a flat mapping is accepted too.
        if isinstance(data, dict) and set(data) == {"info"}:
            return data["info"]
        return data


class TemperatureOverride(Strict):
    model: Optional[str] = Field(None, description="Model name this override applies to (any model when unset).")
    task: Optional[str] = Field(None, description="Dataset, task type or category this override applies to (any when unset).")
    temperature: float = Field(ge=0, description="The temperature to use.")

    @model_validator(mode="after")
    def _has_target(self) -> "TemperatureOverride":
        if self.model is None and self.task is None:
            raise ValueError("a temperature override needs 'model', 'task' or both")
        return self


class JudgeProperties(Strict):
    judge_model: str = Field(description="Model id of the judge.")
    judge_type: Literal["openai", "vllm"] = Field("openai", description="Chat-completions API of the judge endpoint.")
    judge_api_endpoint: str = Field(description="Base URL of the judge API, e.g. https://api.openai.com/v1.")
    judge_api_key: Optional[SecretStr] = Field(None, description="Judge API key (Bearer, or Azure api-key with judge_api_version). Never written to any file.")
    judge_api_version: Optional[str] = Field(None, description="Azure style api-version for the judge endpoint.")
    judge_concurrency: int = Field(8, ge=1, description="Maximum judge requests in flight.")
    judge_temperature: float = Field(0.0, ge=0, description="Judge sampling temperature.")
    judge_prompt_model_override: Optional[str] = Field(None, description="Use the prompt variant tuned for this model instead of judge_model's.")
    judge_timeout: float = Field(120.0, gt=0, description="Seconds per judge attempt.")
    judge_retry_attempts: int = Field(5, ge=0, description="Retries of a judge request on transient failures.")
    judge_max_tokens: Optional[int] = Field(None, gt=0, description="max_tokens for judge replies (omitted when unset).")

    def as_model(self) -> "ModelInfo":
        """The judge as an endpoint entry, so it shares the model client machinery."""
        return ModelInfo(
            name=f"judge:{self.judge_model}", inference_type=self.judge_type, url=self.judge_api_endpoint,
            model=self.judge_model, auth_token=self.judge_api_key, api_version=self.judge_api_version,
            batch_size=self.judge_concurrency, retry_attempts=self.judge_retry_attempts,
            timeout=self.judge_timeout, temperature=self.judge_temperature, max_tokens=self.judge_max_tokens,
        )


class Config(Strict):
    dataset_metric: list[tuple[str, str]] = Field(min_length=1, description="[name, metric] pairs; name is a dataset, task type or category; metric 'all' means the runspec's metrics.")
    filters: Filters = Field(default_factory=Filters, description="Sample selection and prompt additions.")
    aggregate: list[tuple[str, list[str]]] = Field(default_factory=list, description="[metric, [names...]]: weighted and unweighted means over datasets, task types or categories.")
    temperature_overrides: list[TemperatureOverride] = Field(default_factory=list, description="Temperatures by model, by task, or both; the most specific wins.")
    models: list[ModelInfo] = Field(min_length=1, description="The endpoints to evaluate.")
    runspec_dirs: list[str] = Field(default_factory=list, description="Extra folders of runspec JSON files (relative to this config file).")
    prompts_file: Optional[str] = Field(None, description="YAML file adding or overriding system prompts and user prompt add-ons.")
    streaming: bool = Field(False, description="Stream hub datasets instead of downloading them whole.")
    seed: int = Field(0, description="Seed for sampling (filters.shuffle) and for the bootstrap of score intervals and comparisons.")
    bootstrap_resamples: int = Field(1000, ge=0, description="Bootstrap resamples behind each score's ci95/stderr and each paired comparison between models; 0 turns intervals and comparisons off.")
    output_dir: str = Field("run_logs", description="Where run directories are written (relative to the working directory).")
    cache_dir: Optional[str] = Field(None, description="Folder of the inference cache, relative to the working directory (default: <output_dir>/.cache).")
    cache_sampled: bool = Field(False, description="Also reuse cached replies of requests sampled at temperature > 0 without a seed.")
    judge_properties: Optional[JudgeProperties] = Field(None, description="The LLM judge used by llm_judge_* metrics.")

    @model_validator(mode="after")
    def _cross_checks(self) -> "Config":
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {', '.join(dupes)}")
        for override in self.temperature_overrides:
            if override.model is not None and override.model not in names:
                raise ValueError(f"temperature_overrides names unknown model '{override.model}'{closest(override.model, names)}")
        return self


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _interpolate(node: Any, path: str, source: str) -> Any:
    if isinstance(node, dict):
        return {k: _interpolate(v, f"{path}.{k}" if path else str(k), source) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate(v, f"{path}[{i}]", source) for i, v in enumerate(node)]
    if not isinstance(node, str):
        return node

    def substitute(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name, default)
        if value is None:
            raise UserError(f"{source}: environment variable '{name}' is not set (used at {path})")
        return value

    return _ENV.sub(substitute, node)


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
    return f"{source}: {where or 'config'}: {message}" + (f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], (dict, list)) else "")


def parse_config(raw: Any, source: str = "config") -> Config:
    """Validate an already-loaded mapping as a Config; errors name the key."""
    if not isinstance(raw, dict):
        raise UserError(f"{source}: expected a mapping of keys at the top level")
    raw = _interpolate(raw, "", source)
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        # A misspelt key also makes its correct spelling "missing": report the misspelling.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        raise UserError(_describe(errors[0], source)) from None


def load_config(path: str | Path) -> Config:
    """Read, interpolate and validate a config file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: config file not found") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse_config(raw, str(path))


def secrets(config: Config) -> list[str]:
    """Every secret value the config holds (tokens and keys)."""
    values = [m.auth_token.get_secret_value() for m in config.models if m.auth_token]
    if config.judge_properties and config.judge_properties.judge_api_key:
        values.append(config.judge_properties.judge_api_key.get_secret_value())
    return [v for v in values if v]


def redact(text: str, values: list[str]) -> str:
    """`text` with every secret in `values` replaced by <redacted>."""
    for value in values:
        if value:
            text = text.replace(value, "<redacted>")
    return text


def _scrub(node: Any, values: list[str]) -> Any:
    if isinstance(node, dict):
        return {k: _scrub(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrub(v, values) for v in node]
    return redact(node, values) if isinstance(node, str) else node


def redacted(config: Config) -> dict:
    """The resolved config as plain data with every secret replaced, wherever it appears (a launch command too)."""
    data = config.model_dump(mode="json")
    for model in data["models"]:
        if model.get("auth_token"):
            model["auth_token"] = "<redacted>"
    if data.get("judge_properties") and data["judge_properties"].get("judge_api_key"):
        data["judge_properties"]["judge_api_key"] = "<redacted>"
    return _scrub(data, secrets(config))
