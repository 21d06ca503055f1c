"""The run directory: resolved config, per-sample records and scores, final scores, and its lock."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import queue
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Optional, Sequence

import yaml

from lalmeval.background import stop_if_abandoned
from lalmeval.errors import DISK_FULL, UserError, WriteFailed, write_failed
from lalmeval.files import check_regular
from lalmeval.results.clips import ClipKeeper
from lalmeval.results.records import Record
from lalmeval.text import mended, without_surrogates

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """Run ids name a folder inside the output directory: plain names only, never a path."""
    if not _RUN_ID.match(run_id) or ".." in run_id:
        raise UserError(f"--run-id / --resume must be a plain name (letters, digits, '.', '_', '-'; at most 128), got {run_id!r}")
    return run_id

try:
    import fcntl
except ImportError:  # not on POSIX: runs are not locked
    fcntl = None  # type: ignore[assignment]

# Lines queued on an event loop wait this long to go to the writer thread together. Each wake of the thread takes
# the GIL from the loop; a record then reaches its file within a twentieth of a second (close writes at once).
HAND_OVER_SECONDS = 0.05
# What the writer thread reports when a failure is not the disk's: the run stops, and says it is a bug.
INTERNAL_WRITE_ERROR = "internal error while writing records"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")


def safe_name(name: str) -> str:
    """A file-name-safe form of a dataset, model or metric name; distinct names stay distinct.

    Unsafe characters are %-escaped ('m/1' and 'm 1' become 'm%2F1' and 'm%201'), and so are a
    leading dot (no hidden files, no '..') and any '_' that would start, end or double an
    underscore: '__' then only ever separates the parts of a file name like <dataset>__<model>."""
    out: list[str] = []
    for index, ch in enumerate(name):
        plain = ch in _SAFE and not (index == 0 and ch == ".")
        if ch == "_" and (index in (0, len(name) - 1) or (out and out[-1] == "_")):
            plain = False
        out.extend([ch] if plain else [f"%{byte:02X}" for byte in ch.encode("utf-8")])
    return "".join(out) or "%00"


# Longest file name (one path component) common filesystems take: 255 bytes on ext4 and xfs.
NAME_MAX = 255


def file_name(parts: Sequence[str], suffix: str, prefix: str = "") -> str:
    """`prefix` + the safe names of `parts` joined by '__' + `suffix`, at most NAME_MAX bytes: parts too
    long for their share are cut and end in '~' and a hash of the whole name, so distinct names stay
    distinct ('~' is escaped in every safe name, so a cut name never meets an uncut one)."""
    safe = [safe_name(part) for part in parts]
    room = NAME_MAX - len(prefix) - len(suffix) - 2 * (len(parts) - 1)
    if sum(map(len, safe)) > room:
        share = room // len(parts)
        safe = [_shortened(s, part, share) if len(s) > share else s for s, part in zip(safe, parts)]
    return prefix + "__".join(safe) + suffix


def _shortened(safe: str, name: str, limit: int) -> str:
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    cut = safe[: limit - len(digest) - 1]
    if "%" in cut[-2:]:  # never half of a %XX escape
        cut = cut[: cut.rindex("%")]
    return f"{cut}~{digest}"


def read_jsonl(path: Path, what: str = "JSONL file") -> Iterable[dict[str, Any]]:
    """The JSON objects of a JSONL file, skipping a line cut short by a crash (or by a full disk)."""
    if not path.exists():
        return
    check_regular(path, what)
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not number % 1024:
                stop_if_abandoned()  # a stored run or cache can be large: Ctrl-C while it is read ends the read
            try:
                item = json.loads(line)
            except (ValueError, RecursionError):  # a torn line, bytes that are not UTF-8, or garbage nested too deeply
                continue
            if isinstance(item, dict):
                # A line json_line wrote with \u escapes (or written before text was mended) may spell a lone surrogate.
                yield mended(item) if b"\\u" in line else item


class _WriterThread:
    """One background thread doing every record write, so the event loop never waits on disk or the GIL.

    It never dies: a failed write is kept as `error`, every later line is dropped (so nothing is
    written out of order after a gap), waiters are always released, and `on_error` is called once."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._pending: list[tuple[BinaryIO, dict[str, Any], None]] = []   # lines queued on an event loop, not handed over yet
        self._flush_on: Optional[asyncio.AbstractEventLoop] = None        # the loop a hand-over is scheduled on
        self.error: Optional[str] = None
        self.on_error: Optional[Callable[[str], None]] = None

    def submit(self, file: BinaryIO, item: Optional[dict[str, Any]], done: Optional[threading.Event] = None) -> None:
        """Queue a line, or (item None) a mark: `done` is set once every line queued before it is written.

        Lines queued on an event loop are handed to the thread together, HAND_OVER_SECONDS after the first of
        them: waking the thread for each line, or for each turn of a busy loop, cost more than the writing."""
        loop = _running_loop() if item is not None and done is None else None
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="lalmeval-writer", daemon=True)
                self._thread.start()
            if loop is not None:
                self._pending.append((file, item, None))
                if self._flush_on is not loop:
                    self._flush_on = loop
                    loop.call_later(HAND_OVER_SECONDS, self._hand_over)
                return
            self._hand_over_locked()   # what an event loop queued goes first: a mark waits for it too
            self._queue.put((file, item, done))

    def _hand_over(self) -> None:
        with self._lock:
            self._hand_over_locked()

    def _hand_over_locked(self) -> None:
        self._flush_on = None
        if self._pending:
            self._queue.put(self._pending)
            self._pending = []

    def reset(self) -> None:
        """Forget an earlier failure (a new run in the same process)."""
        self.error, self.on_error = None, None

    def _run(self) -> None:
        while True:
            batch: list = []
            entry = self._queue.get()
            while True:
                batch.extend(entry) if isinstance(entry, list) else batch.append(entry)
                if self._queue.empty():
                    break
                entry = self._queue.get_nowait()
            try:
                self._write(batch)
            except BaseException as exc:  # noqa: BLE001 - the thread must outlive any failure
                # Not the disk (its refusals are OSErrors, handled in _write): a bug, and said to be one.
                self._fail(f"{INTERNAL_WRITE_ERROR}: {type(exc).__name__}: {exc}")
            finally:
                for _, _, done in batch:
                    if done is not None:
                        done.set()

    def _write(self, batch: list) -> None:
        chunks: dict[BinaryIO, list[bytes]] = {}
        for file, item, _ in batch:
            if item is not None:  # serialized here, off the event loop
                chunks.setdefault(file, []).append(json_line(item))
        for file, lines in chunks.items():
            if self.error is not None:
                return
            try:
                _write_all(file, b"".join(lines))
            except OSError as exc:
                self._fail(f"cannot write {getattr(file, 'name', 'a file')}: {exc.strerror or exc}")

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason
            if self.on_error is not None:
                self.on_error(reason)


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def json_line(item: Any) -> bytes:
    """One JSONL line: UTF-8 text as it reads, or — for text holding a lone surrogate, which UTF-8 cannot
    encode — \\u escapes for everything that is not ASCII, which read back as the very same string."""
    text = json.dumps(item, ensure_ascii=False, default=_plain)
    try:
        return (text + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(item, default=_plain) + "\n").encode()


def _plain(value: Any) -> Any:
    """What json cannot write itself: numpy scalars and arrays, sets, anything else as text."""
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _write_all(file: BinaryIO, data: bytes) -> None:
    """Unbuffered writes may be partial (a nearly full disk): keep writing until all is out or it fails."""
    view = memoryview(data)
    while view:
        written = file.write(view)
        if not written:
            raise OSError(28, "no progress writing (disk full?)")
        view = view[written:]


_WRITER = _WriterThread()


def watch_writes(callback: Optional[Callable[[str], None]]) -> None:
    """Call `callback(reason)` (from the writer thread) when a write fails; clears an earlier failure."""
    _WRITER.reset()
    _WRITER.on_error = callback


def write_error() -> Optional[str]:
    """The first failed write of this process since watch_writes(), if any."""
    return _WRITER.error


class JsonlWriter:
    """Appends JSON lines through the writer thread: written within moments, never torn by a crash."""

    def __init__(self, path: Path, mode: str = "a"):
        try:
            check_regular(path, "file")
        except UserError as exc:
            raise WriteFailed(f"cannot write {exc}") from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file: Optional[BinaryIO] = path.open(mode + "b", buffering=0)
            if mode == "a" and path.stat().st_size:
                self._ensure_newline(path)
        except OSError as exc:
            failed = write_failed(path, exc)
            _WRITER._fail(str(failed))  # like a refused line: the run stops, whichever writer met it
            raise failed from None

    def _ensure_newline(self, path: Path) -> None:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                _write_all(self._file, b"\n")  # a line cut short by a crash: start on a fresh line

    def write(self, item: dict[str, Any]) -> None:
        """Queue one line (the item must not change afterwards); raises WriteFailed once the disk has refused a write."""
        assert self._file is not None, "write after close"
        if _WRITER.error is not None:
            raise WriteFailed(_WRITER.error)
        _WRITER.submit(self._file, item)

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
        self.clips = ClipKeeper(root)   # copies of clips embedded in the data, for report.html to play
        self._lock_handle: Optional[Any] = None
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in DISK_FULL:
                raise write_failed(root, exc) from None
            raise UserError(f"{root}: cannot create the run directory: {exc.strerror or exc}") from None

    def lock(self) -> None:
        """Hold the run directory for this process; a second run on it is refused, naming the holder.

        flock is released by the kernel when the holder dies, so a run killed with SIGKILL can be resumed."""
        if fcntl is None:
            return
        path = self.root / ".lock"
        check_regular(path, "lock file")
        try:
            handle = path.open("a+", encoding="utf-8")
        except OSError as exc:
            raise write_failed(path, exc) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise UserError(f"{self.root}: this run directory is in use by another run ({holder}); wait for it to end or choose another --run-id") from None
        try:  # the holder's line is what a second run prints; the lock itself is the flock
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            handle.flush()
        except OSError as exc:
            with contextlib.suppress(OSError):  # closing flushes the refused line again (and closes all the same)
                handle.close()
            raise write_failed(path, exc) from None
        self._lock_handle = handle

    def unlock(self) -> None:
        if self._lock_handle is not None:
            self._lock_handle.close()
            self._lock_handle = None

    def records_path(self, dataset: str, model: str) -> Path:
        return self.root / "records" / file_name([dataset, model], ".jsonl")

    def scores_path(self, dataset: str, metric: str, model: str) -> Path:
        return self.root / "scores" / file_name([dataset, metric, model], ".jsonl")

    def files(self) -> list[tuple[Path, str]]:
        """The run's own files besides records and scores, with what each is (for check_regular)."""
        return [(self.root / "config.yaml", "run config"), (self.root / "final_scores.json", "final scores file")]

    def write_config(self, data: dict[str, Any]) -> None:
        write_atomic(self.root / "config.yaml", yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

    def write_final(self, data: dict[str, Any]) -> Path:
        path = self.root / "final_scores.json"
        write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return path

    def stored_records(self, dataset: str, model: str) -> dict[tuple[str, int], Record]:
        """The last record stored for each (sample, repeat) of (dataset, model), failed or not."""
        stored: dict[tuple[str, int], Record] = {}
        for item in read_jsonl(self.records_path(dataset, model), "records file"):
            try:
                record = Record(**item)
            except TypeError:
                continue
            stored[record.unit] = record
        return stored


def write_atomic(path: Path, text: str) -> Path:
    """Write a whole file or leave the old one: a reader never sees half of it, and a failure leaves no temporary file.

    A refused write (full disk, Ctrl-C in the middle) removes `<name>.tmp` and raises WriteFailed
    (or the KeyboardInterrupt) with the file and the reason."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.unlink(missing_ok=True)  # our scratch name: whatever is left there (a named pipe would block) goes
        # A lone surrogate that came in some way nothing mended becomes U+FFFD, not a crash.
        tmp.write_text(without_surrogates(text), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise write_failed(path, exc) from None
        raise
    return path
