"""Where results come from: what a score pools beyond fresh answers from one server (cached replies, replicas),
and what made the run (lalmeval's version and commit, its times, the data it read, its config's hash)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from lalmeval.results.cache import EARLIER_RUN
from lalmeval.version import __version__


def cached_answers(details: dict[str, Any]) -> int:
    """How many of a score's answers came from the inference cache (details.from_cache)."""
    found = details.get("from_cache")
    return int(found.get("answers") or 0) if isinstance(found, dict) else 0


def provenance_notes(scores: Sequence[dict[str, Any]]) -> list[str]:
    """What a score mixes beyond one fresh server: replies from the cache (and the runs that asked for them) and
    replicas pooled into one model. One line per (model, dataset) or model, from final_scores.json score entries."""
    notes: dict[str, None] = {}
    for score in scores:
        details = score.get("details") or {}
        found = details.get("from_cache")
        if cached_answers(details):
            runs = ", ".join(f"{count} from {run if run == EARLIER_RUN else 'run ' + run}" for run, count in found.get("runs", {}).items())
            notes[f"{score['model']} on {score['dataset']}: {found['answers']} answer(s) came from the inference cache ({runs}), not from the server"] = None
        replicas = details.get("replicas")
        if isinstance(replicas, list) and len(replicas) > 1:
            notes[f"{score['model']}: one model served by {len(replicas)} replicas whose answers are pooled into one score: {', '.join(map(str, replicas))}"] = None
    return list(notes)


def source_commit() -> tuple[Optional[str], Optional[bool]]:
    """(git commit, dirty) of the checkout lalmeval runs from; (None, None) for an installed copy or without git.

    Dirty means a tracked file differs from the commit (untracked files, such as run folders, do not count)."""
    checkout = Path(__file__).resolve().parents[2]

    def git(*args: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != checkout:   # lalmeval installed inside someone else's repository
        return None, None
    commit, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    return commit, (bool(status) if status is not None else None)


def config_hash(redacted: dict[str, Any]) -> str:
    """sha256 of the resolved config as stored in config.yaml (secrets already blanked), keys sorted."""
    text = json.dumps(redacted, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _stamp(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(moment))


def run_provenance(started: float, finished: float, data_hashes: dict[str, Any], redacted_config: dict[str, Any]) -> dict[str, Any]:
    """final_scores.json "provenance": lalmeval's version and commit, the run's times, what data it read, its config's hash."""
    commit, dirty = source_commit()
    return {"version": __version__, "commit": commit, "dirty": dirty, "started": _stamp(started), "finished": _stamp(finished),
            "duration_s": round(finished - started, 3), "data_hashes": data_hashes, "config_hash": config_hash(redacted_config)}
