"""The run directory: resolved config, per-sample records and scores, final scores."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Optional, TextIO

import yaml

from lalmeval.records import Record


def safe_name(name: str) -> str:
    """A file-name-safe form of a dataset, model or metric name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "_"


def _read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                yield json.loads(line)
            except ValueError:  # a line cut short by a crash
                continue


class JsonlWriter:
    """Appends one JSON object per line and flushes it, so a crash loses at most the line in progress."""

    def __init__(self, path: Path, mode: str = "a"):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: Optional[TextIO] = path.open(mode, encoding="utf-8")
        if mode == "a" and path.stat().st_size:
            self._ensure_newline(path)

    def _ensure_newline(self, path: Path) -> None:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                self._handle.write("\n")

    def write(self, item: dict[str, Any]) -> None:
        assert self._handle is not None
        self._handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class RunStore:
    """Files of one run under DIR/<run_id>/."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def records_path(self, dataset: str, model: str) -> Path:
        return self.root / "records" / f"{safe_name(dataset)}__{safe_name(model)}.jsonl"

    def scores_path(self, dataset: str, metric: str, model: str) -> Path:
        return self.root / "scores" / f"{safe_name(dataset)}__{safe_name(metric)}__{safe_name(model)}.jsonl"

    def write_config(self, data: dict[str, Any]) -> None:
        self._atomic(self.root / "config.yaml", yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

    def write_final(self, data: dict[str, Any]) -> Path:
        path = self.root / "final_scores.json"
        self._atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return path

    def finished_records(self, dataset: str, model: str) -> dict[str, Record]:
        """Successful records already stored for (dataset, model), by sample id (last one wins)."""
        done: dict[str, Record] = {}
        for item in _read_jsonl(self.records_path(dataset, model)):
            try:
                record = Record(**item)
            except TypeError:
                continue
            if record.failed:
                done.pop(record.id, None)
            else:
                done[record.id] = record
        return done

    @staticmethod
    def _atomic(path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
