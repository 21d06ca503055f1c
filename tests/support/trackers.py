"""Reading back what `--log` wrote, with each tracker's own format: W&B's offline run file, MLflow's store, TensorBoard's events."""

from __future__ import annotations

import importlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest


def require(package: str) -> Any:
    """Import a tracker package; without it the test is skipped — except in CI (LALMEVAL_REQUIRE_SYSTEM_PACKAGES), where it fails."""
    try:
        return importlib.import_module(package)
    except ImportError:
        if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
            pytest.fail(f"{package} is required (LALMEVAL_REQUIRE_SYSTEM_PACKAGES is set): requirements.txt installs it")
        pytest.skip(f"{package} is not installed (pip install -e \".[trackers]\")")


_BLOCK, _HEADER = 32768, 7   # W&B's run file is a LevelDB-style log: 32 KB blocks of (crc32, length, type) records


def wandb_records(path: Path) -> list[Any]:
    """The protobuf records of an offline W&B run file (`run-<id>.wandb`), in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    chunks, pending, pos = [], b"", _HEADER
    while pos + _HEADER <= len(data):
        if _BLOCK - pos % _BLOCK < _HEADER:   # the rest of a block too small for a header is padding
            pos += _BLOCK - pos % _BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        chunk, pos = data[pos + _HEADER:pos + _HEADER + length], pos + _HEADER + length
        if kind == 1:       # a whole record
            chunks.append(chunk)
        elif kind == 2:     # first part
            pending = chunk
        elif kind == 3:     # middle part
            pending += chunk
        elif kind == 4:     # last part
            chunks.append(pending + chunk)
    records = []
    for chunk in chunks:
        record = pb.Record()
        record.ParseFromString(chunk)
        records.append(record)
    return records


def wandb_run(folder: Path) -> dict[str, Any]:
    """One offline W&B run folder: its name, config, the last value of each logged key, and its tables."""
    (file,) = folder.glob("*.wandb")
    found: dict[str, Any] = {"name": None, "config": {}, "history": {}, "tables": {}}
    for record in wandb_records(file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            found["name"] = record.run.display_name
            found["config"] = {item.key: json.loads(item.value_json) for item in record.run.config.update}
        elif kind == "history":
            for item in record.history.item:
                found["history"]["/".join(item.nested_key) or item.key] = json.loads(item.value_json)
    for table in folder.glob("files/media/table/**/*.table.json"):
        found["tables"][table.relative_to(folder / "files" / "media" / "table").as_posix().rsplit("_", 2)[0]] = json.loads(table.read_text())
    return found


def tensorboard_events(folder: Path) -> list[Any]:
    """The Event protos of a TensorBoard run folder's event files: TFRecords (length, its CRC, the bytes, their CRC)."""
    from tensorboardX.proto.event_pb2 import Event

    events = []
    for file in sorted(folder.glob("events.out.tfevents.*")):
        data, pos = file.read_bytes(), 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = Event()
            event.ParseFromString(data[pos + 12:pos + 12 + length])
            events.append(event)
            pos += 12 + length + 4
    return events


def tensorboard_run(folder: Path) -> dict[str, Any]:
    """The scalars (step, value) and texts of one TensorBoard run folder, as TensorBoard's scalar and text dashboards read them."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    texts: dict[str, list[str]] = {}
    for event in tensorboard_events(folder):
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name == "text":
                texts.setdefault(value.tag.removesuffix("/text_summary"), []).append(value.tensor.string_val[0].decode())
            elif value.HasField("simple_value"):
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return {"scalars": scalars, "texts": texts}
