"""The Settings section of report.html: how each model was reached and asked, from the run directory.

Per model, its entry of the run's config.yaml (secrets are already redacted there). Per dataset and
model, what the requests carried, read from the first record: generation parameters as sent, the
system prompt and a sample's prompt; and the scoring protocol when the scores name one."""

from __future__ import annotations

import json
from typing import Any, Optional

import yaml

from lalmeval.reports.rundir import RunDir
from lalmeval.results.store import RunStore

# A model entry's keys shown, in this order, when set (the rest only deliver requests or keep files).
MODEL_KEYS = ("url", "model", "inference_type", "api_version", "temperature", "max_tokens", "generation_kwargs", "audio_format",
              "chunk_size", "long_audio", "batch_size", "timeout", "retry_attempts", "replicas")


def _config(run: RunDir) -> dict[str, Any]:
    try:
        data = yaml.safe_load((run.path / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _entries(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Model entries by name, written flat or as `- info: {...}`."""
    found = {}
    for entry in config.get("models") or []:
        entry = entry.get("info", entry) if isinstance(entry, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            found[entry["name"]] = entry
    return found


def _compact(value: Any) -> str:
    """A setting as one line: nulls and empty values left out of mappings."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if v not in (None, [], {})}
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=False)


def model_settings(run: RunDir) -> list[tuple[str, list[tuple[str, str]]]]:
    """(model, [(key, value), ...]) for each model of the scores, from the run's config.yaml."""
    entries = _entries(_config(run))
    out = []
    for name in dict.fromkeys(s["model"] for s in run.scores):
        entry = entries.get(name, {})
        shown = [(k, _compact(entry[k])) for k in MODEL_KEYS if entry.get(k) not in (None, [], {}) and _compact(entry[k]) not in ("{}", "")]
        out.append((name, shown))
    return out


def first_record(run: RunDir, dataset: str, model: str) -> Optional[dict[str, Any]]:
    """The first whole record of (dataset, model) that carries its request (prompt and parameters)."""
    path = RunStore(run.path).records_path(dataset, model)
    try:
        with path.open("rb") as handle:
            for line in handle:
                try:
                    item = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(item, dict) and (item.get("prompt") or item.get("params")):
                    return item
    except OSError:
        return None
    return None


def _protocol(run: RunDir, dataset: str, model: str) -> str:
    for score in run.scores:
        used = (score.get("details") or {}).get("protocol")
        if score["dataset"] == dataset and score["model"] == model and isinstance(used, dict) and used.get("name"):
            return f"{used['name']}@{used['version']}" if used.get("version") else str(used["name"])
    return ""


def request_settings(run: RunDir) -> list[dict[str, str]]:
    """Per (dataset, model) scored: parameters as sent, system prompt, a sample's prompt and the protocol."""
    rows = []
    for dataset, model, _ in run.groups():
        record = first_record(run, dataset, model) or {}
        params = record.get("params")
        rows.append({"dataset": dataset, "model": model, "params": _compact(params) if isinstance(params, dict) else "",
                     "system": str(record.get("system") or ""), "prompt": str(record.get("prompt") or ""),
                     "sample": str(record.get("id") or ""), "protocol": _protocol(run, dataset, model)})
    return rows
