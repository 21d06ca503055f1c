"""A hub repository in a hub cache of the test's own, laid out as huggingface_hub lays one out, so
a hub id is read offline exactly as after a download."""

from __future__ import annotations

import hashlib
from pathlib import Path


def cached_repo(cache: Path, repo: str, snapshot: Path, revision: str = "main") -> Path:
    """Move the folder `snapshot` into `cache` as dataset `repo` at `revision`: refs/<revision> names
    the commit whose snapshots/<commit>/ folder holds the files. Returns that folder."""
    storage = cache / f"datasets--{repo.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
    (storage / "refs" / revision).parent.mkdir(parents=True, exist_ok=True)
    (storage / "refs" / revision).write_text(commit)
    (storage / "snapshots").mkdir(parents=True, exist_ok=True)
    return snapshot.rename(storage / "snapshots" / commit)


def use_cache(monkeypatch, cache: Path) -> Path:
    """Point huggingface_hub at `cache` for this test (it reads the constant on each call)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache
