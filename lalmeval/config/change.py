"""Refuse to continue a run under a config that would make it a different evaluation.

A run directory holds one evaluation: its config.yaml says what was asked, its final_scores.json
what came back. Resuming it with other datasets, models, prompts or sample selection would
overwrite both and mix two evaluations in one place, so that needs saying out loud
(--allow-config-change). Settings that only change how requests are delivered or where things
are kept (the operational keys below) may change freely: resuming with a longer timeout, a
smaller batch_size or a new token is the normal case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import ValidationError

from lalmeval.config.options import RunOptions
from lalmeval.config.schema import Config
from lalmeval.config.secrets import redacted_config
from lalmeval.errors import UserError

# Keys whose value never changes which samples are evaluated, what is sent or how it is scored. A model's
# `launch` is not one: the command that starts a server is often all a config says of its weights.
# allowed_data_dirs only decides which files may be read: a refused sample failed, and a resume retries it;
# max_audio_seconds too: raising it after clips failed over it and resuming is how they get answered.
OPERATIONAL = frozenset({"output_dir", "cache_dir", "cache", "cache_sampled", "streaming", "max_failure_rate", "allowed_data_dirs",
                         "max_audio_seconds", "max_cost", "max_run_tokens"})
OPERATIONAL_MODEL = frozenset({
    "auth_token", "delay", "retry_attempts", "timeout", "batch_size", "launch_timeout",
    "max_reply_mb", "verify_ssl", "price", "max_audio_mb",
})
OPERATIONAL_JUDGE = frozenset({
    "judge_api_key", "judge_concurrency", "judge_timeout", "judge_retry_attempts", "judge_verify_ssl", "judge_price",
})
# What only decides how stored predictions are scored: --reeval may change it freely (nothing is requested again).
SCORING = frozenset({"aggregate", "bootstrap_resamples", "judge_properties"})
SHOWN = 3  # differences named in the message; the rest are counted


def meaningful(config: dict[str, Any], reeval: bool = False) -> dict[str, Any]:
    """The parts of a dumped config that decide what a run evaluates, in a comparable form."""
    out = {k: v for k, v in config.items() if k not in OPERATIONAL and not (reeval and k in SCORING)}
    # Models are compared by name: listing them in another order asks for the same evaluation.
    # --reeval sends nothing and scores the stored predictions, so only the names matter then.
    # Entries sharing a name are the replicas of one model: compared as the set of them, in any order.
    entries: dict[Any, list[dict[str, Any]]] = {}
    for m in config.get("models") or []:
        if isinstance(m, dict):
            entries.setdefault(m.get("name"), []).append({} if reeval else {k: v for k, v in m.items() if k not in OPERATIONAL_MODEL})
    out["models"] = {name: group[0] if len(group) == 1 or reeval else sorted(group, key=repr) for name, group in entries.items()}
    pairs = config.get("dataset_metric") or []
    # --reeval scores the stored predictions again: adding (or dropping) a metric asks for no other answers.
    out["dataset_metric"] = sorted({str(p[0]) for p in pairs if p}) if reeval else sorted(list(pair) for pair in pairs)
    if isinstance(config.get("judge_properties"), dict) and not reeval:
        out["judge_properties"] = {k: v for k, v in config["judge_properties"].items() if k not in OPERATIONAL_JUDGE}
    if isinstance(config.get("transcriber"), dict):   # how replies are transcribed is part of how they are scored
        out["transcriber"] = {k: v for k, v in config["transcriber"].items() if k not in OPERATIONAL_MODEL}
    return out


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Where two comparable configs differ, as readable key paths with old → new values."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in [*old, *(k for k in new if k not in old)]:
            where = f"{path}[{key}]" if path == "models" else (f"{path}.{key}" if path else str(key))
            if key not in new:
                found.append(f"{where} removed")
            elif key not in old:
                found.append(f"{where} added")
            else:
                found += differences(old[key], new[key], where)
        return found
    return [] if old == new else [f"{path}: {_short(old)} → {_short(new)}"]


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stored(path: Path) -> Optional[dict[str, Any]]:
    """The config a run directory holds, with defaults filled in as today's schema has them."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None  # nothing readable to protect
    if not isinstance(data, dict):
        return None
    try:
        # Keys added since that run was made then compare equal when they hold their defaults.
        return redacted_config(Config.model_validate(data))
    except ValidationError:
        return data


def check_config_change(path: Path, new: dict[str, Any], options: RunOptions) -> None:
    """Raise a UserError when the run directory's stored config differs meaningfully from `new`."""
    if options.allow_config_change or not path.is_file():
        return
    stored = _stored(path)
    if stored is None:
        return
    found = differences(meaningful(stored, options.reeval), meaningful(new, options.reeval))
    if not found:
        return
    more = f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    raise UserError(
        f"{path.parent} holds a run of a different config ({'; '.join(found[:SHOWN])}{more}): continuing would mix two "
        f"evaluations in one run and overwrite its config.yaml and final_scores.json. Use a new --run-id, or pass "
        f"--allow-config-change to continue this run under the new config"
    )
