"""The run directory: resolved config, per-sample records and scores, final scores."""

from __future__ import annotations

import json
import os
import queue
import threading
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Optional

import yaml

from lalmeval.records import Record


def safe_name(name: str) -> str:
    """A file-name-safe form of a dataset, model or metric name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "_"


def read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    """The JSON objects of a JSONL file, skipping a line cut short by a crash."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                yield json.loads(line)
            except ValueError:  # a line cut short by a crash
                continue


class _WriterThread:
    """One background thread doing every record write, so the event loop never waits on disk or the GIL."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def submit(self, file: BinaryIO, line: Optional[bytes], done: Optional[threading.Event] = None) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lalmeval-writer", daemon=True)
                self._thread.start()
        self._queue.put((file, line, done))

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            chunks: dict[BinaryIO, list[bytes]] = {}
            for file, line, _ in batch:
                if line is not None:
                    chunks.setdefault(file, []).append(line)
            for file, lines in chunks.items():
                file.write(b"".join(lines))  # each line is whole in the file once written
            for _, _, done in batch:
                if done is not None:
                    done.set()


_WRITER = _WriterThread()


class JsonlWriter:
    """Appends JSON lines through the writer thread: written within moments, never torn by a crash."""

    def __init__(self, path: Path, mode: str = "a"):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: Optional[BinaryIO] = path.open(mode + "b", buffering=0)
        if mode == "a" and path.stat().st_size:
            self._ensure_newline(path)

    def _ensure_newline(self, path: Path) -> None:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                self._file.write(b"\n")  # a line cut short by a crash: start on a fresh line

    def write(self, item: dict[str, Any]) -> None:
        assert self._file is not None, "write after close"
        _WRITER.submit(self._file, (json.dumps(item, ensure_ascii=False) + "\n").encode())

    def close(self) -> None:
        """Wait until every queued line is written, then close the file."""
        if self._file is not None:
            done = threading.Event()
            _WRITER.submit(self._file, None, done)
            done.wait()
            self._file.close()
            self._file = None


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

    def stored_records(self, dataset: str, model: str) -> dict[str, Record]:
        """The last record stored for each sample of (dataset, model), failed or not."""
        stored: dict[str, Record] = {}
        for item in read_jsonl(self.records_path(dataset, model)):
            try:
                record = Record(**item)
            except TypeError:
                continue
            stored[record.id] = record
        return stored

    @staticmethod
    def _atomic(path: Path, text: str) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
