"""Tables read through the `datasets` library: hub ids, local hub-layout folders, save_to_disk folders."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence
from urllib.parse import urlsplit

from lalmeval.data.tables import BATCH, DATASETS_LOCK, FORMATS, Table, TableRequest
from lalmeval.errors import UserError

PROBE_SECONDS = 3.0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _undecoded(ds: Any, audio_column: Optional[str]) -> Any:
    """Cast audio (and image) columns so that rows carry {bytes, path} and nothing is decoded."""
    from datasets import Audio, Image

    features = getattr(ds, "features", None) or {}
    for name, feature in features.items():
        if isinstance(feature, Audio) and feature.decode:
            ds = ds.cast_column(name, Audio(decode=False))
        elif isinstance(feature, Image) and feature.decode:
            ds = ds.cast_column(name, Image(decode=False))
    return ds


class ArrowTable(Table):
    """A datasets.Dataset (Arrow, memory-mapped): columns by name, rows by index, batch by batch."""

    def __init__(self, ds: Any, request: TableRequest):
        self.ds, self.request = ds, request
        self.columns = list(ds.column_names)

    def scan(self) -> Iterator[dict[str, Any]]:
        fields = [f for f in self.request.fields if f in self.columns]
        if not fields:
            return ({} for _ in range(len(self.ds)))
        return (dict(zip(fields, values)) for batch in self.ds.select_columns(fields).iter(batch_size=1000)
                for values in zip(*(batch[f] for f in fields)))

    def rows(self, indices: Optional[Sequence[int]]) -> Iterator[dict[str, Any]]:
        subset = self.ds if indices is None else self.ds.select(indices)
        for batch in subset.iter(batch_size=BATCH):
            yield from (dict(zip(batch, values)) for values in zip(*batch.values()))


class StreamTable(Table):
    """A streamed hub dataset: rows arrive once, in order; nothing can be scanned ahead."""

    def __init__(self, ds: Any, request: TableRequest):
        self.ds = ds
        features = getattr(ds, "features", None)
        self.columns = list(ds.column_names or (features or {}).keys())

    def scan(self) -> None:
        return None

    def rows(self, indices: Optional[Sequence[int]]) -> Iterator[dict[str, Any]]:
        assert indices is None, "a stream is read whole, in order"
        return iter(self.ds)


def _hub_reachable() -> Optional[str]:
    """None when the hub answers a TCP connect (or a proxy is set); else why not."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "huggingface.co", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
        return None
    except OSError as exc:
        return f"{host}:{port} is unreachable ({exc.strerror or exc})"


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _load(path: Path, request: TableRequest) -> Any:
    from datasets import load_dataset

    local = path.is_dir()
    if not local and not _offline():
        problem = _hub_reachable()
        if problem:  # fail in seconds, not after a minute of retries
            raise UserError(f"dataset '{request.name}': cannot load '{request.hub_id}' from the hub: {problem}. "
                            f"Run once with network to cache it, then set HF_HUB_OFFLINE=1 to use the cache offline")
    try:
        return load_dataset(str(path) if local else request.hub_id, request.subset, split=request.split,
                            streaming=request.streaming, revision=request.revision)
    except Exception as exc:  # the library raises many types; the message is what matters
        hint = " (offline: it is not in the local cache)" if _offline() and not local else ""
        raise UserError(f"dataset '{request.name}': cannot load '{request.hub_id or path}'{hint}: {_first_line(exc)}") from None


@FORMATS.register("hub")
def _open_hub(path: Path, request: TableRequest) -> Table:
    with DATASETS_LOCK:
        ds = _undecoded(_load(path, request), request.audio_column)
    return StreamTable(ds, request) if request.streaming else ArrowTable(ds, request)


@FORMATS.register("disk")
def _open_disk(path: Path, request: TableRequest) -> Table:
    from datasets import DatasetDict, load_from_disk

    with DATASETS_LOCK:
        try:
            ds = load_from_disk(str(path))
        except Exception as exc:  # the library raises many types; the message is what matters
            raise UserError(f"{path}: dataset '{request.name}': not a readable save_to_disk folder: {_first_line(exc)}") from None
        if isinstance(ds, DatasetDict):
            if request.split not in ds:
                raise UserError(f"{path}: split '{request.split}' not found (have: {', '.join(ds)})")
            ds = ds[request.split]
        ds = _undecoded(ds, request.audio_column)
    return ArrowTable(ds, request)


def hub_columns(name: str, repo: str, subset: Optional[str], revision: Optional[str]) -> list[str]:
    """A hub dataset's columns from its metadata, without downloading its data."""
    from datasets import load_dataset_builder

    if not _offline() and (problem := _hub_reachable()):
        raise UserError(f"dataset '{name}': cannot reach the hub to check '{repo}': {problem}")
    with DATASETS_LOCK:
        try:
            builder = load_dataset_builder(repo, subset, revision=revision)
        except Exception as exc:  # the library raises many types; the message is what matters
            hint = " (offline: it is not in the local cache)" if _offline() else ""
            raise UserError(f"dataset '{name}': cannot read '{repo}'{hint}: {_first_line(exc)}") from None
    return list(builder.info.features or {})
