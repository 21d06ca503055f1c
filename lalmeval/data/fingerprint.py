"""What data a run read, as a content hash (local files and folders) or a hub revision: final_scores.json provenance."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.data.source import locate
from lalmeval.errors import UserError

_BLOCK = 1 << 20


def file_sha256(path: Path, digest: Optional[Any] = None) -> str:
    """sha256 of a file's bytes, read in blocks (folded into `digest` when given)."""
    own = digest or hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            own.update(block)
    return own.hexdigest()


def folder_sha256(folder: Path) -> tuple[str, int]:
    """sha256 over every file under a folder (relative path and bytes, in path order), and how many files."""
    digest = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode("utf-8", "surrogatepass") + b"\0")
        file_sha256(path, digest)
    return digest.hexdigest(), len(files)


def hub_revision(repo: str, revision: Optional[str]) -> Optional[str]:
    """The commit of the hub dataset in the local cache (the revision read offline), or None when it is not cached."""
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(repo, repo_type="dataset", revision=revision, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, offline, or no huggingface_hub: the revision asked for is all we know
        return None
    return Path(path).name


def data_hash(dataset: Dataset) -> dict[str, Any]:
    """{"sha256", "files"} of a local dataset's file or folder, or {"hub", "revision"} of a hub dataset.

    The hash covers the data files the runspec names (a folder: every file in it, audio included);
    clips a table refers to by path outside its folder are covered by each record's request key."""
    try:
        kind, path = locate(dataset)
    except UserError as exc:
        return {"error": str(exc)}
    try:
        if kind == "hub":
            return {"hub": dataset.spec.hf_repo, "revision": hub_revision(dataset.spec.hf_repo, dataset.spec.revision) or dataset.spec.revision}
        if path.is_dir():
            digest, count = folder_sha256(path)
            return {"path": str(path), "sha256": digest, "files": count}
        return {"path": str(path), "sha256": file_sha256(path), "files": 1}
    except OSError as exc:
        return {"error": f"{path}: {exc.strerror or exc}"}
