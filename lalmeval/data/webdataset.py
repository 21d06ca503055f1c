"""WebDataset shards: `.tar` files in which a sample is the run of files sharing a key (`0001.flac`,
`0001.json`, `0001.txt`), read straight from the archives.

`datasets` reads such shards by decoding their audio through torchcodec; here the archives are
indexed once — member headers only, the data is skipped — and a row's files are read by offset
when the row is, so memory holds the index (a few dozen bytes per file) and the rows in hand,
never a shard. Columns are named as the library names them: the file's extension (`flac`, `json`,
`txt`, `seg.wav`), plus `__key__` (the sample's key) and `__url__` (its shard). Values too: audio as
a `{bytes, path}` clip, `json` as its object (reach a field with `json.text`, see lalmeval.data.fields),
`txt` as text, `cls` as a number, anything else as bytes. Shards are split by their names as the
hub splits files (`test-000000.tar`, `train/000.tar`); compressed shards (`.tar.gz`) are not read.
"""

from __future__ import annotations

import json
import re
import tarfile
from array import array
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Optional, Sequence

from lalmeval.background import stop_if_abandoned
from lalmeval.data.folder import split_files
from lalmeval.data.tables import FORMATS, Table, TableRequest, only_columns
from lalmeval.errors import UserError

AUDIO = {"aiff", "au", "avr", "caf", "flac", "htk", "svx", "mat4", "mat5", "mpc2k", "ogg", "paf", "pvf", "raw", "rf64", "sd2", "sds",
         "ircam", "voc", "w64", "wav", "nist", "wavex", "wve", "xi", "mp3", "opus", "m4a", "aac", "webm", "mp4", "wma", "amr"}
TEXT = {"txt", "text", "transcript"}
NUMBER = {"cls", "cls2", "index", "inx", "id"}
JSON = {"json", "jsn"}
KEY, URL = "__key__", "__url__"
_NAME = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # key: the path up to the first dot of the file name; field: the rest


def shards(path: Path, split: str, name: str) -> list[Path]:
    """The shards of `split`: the file itself, or a folder's `.tar` files split by their names."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.rglob("*.tar") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not found:
        raise UserError(f"{path}: dataset '{name}': no .tar shards in the folder")
    return split_files(path, found, split, f"{path}: dataset '{name}'", "shard")


class ShardIndex:
    """Where every sample's files lie in the shards: per row its shard, key and first file; per file its
    field, offset and size (arrays of integers, so a million files cost tens of megabytes, not gigabytes)."""

    def __init__(self, paths: list[Path]):
        self.paths, self.fields, self.keys = paths, {}, []  # type: tuple[list[Path], dict[str, int], list[str]]
        self.row_shard, self.row_first = array("l"), array("q")
        self.member_field, self.member_offset, self.member_size = array("l"), array("q"), array("q")
        for number, path in enumerate(paths):
            self._index(number, path)
        self.row_first.append(len(self.member_field))  # the end of the last row's files

    def _index(self, number: int, path: Path) -> None:
        seen: set[str] = set()
        try:
            with tarfile.open(path, "r:") as archive:  # "r:": an uncompressed archive, read by seeking past each file's data
                while (member := archive.next()) is not None:
                    archive.members = []  # tarfile keeps every header it has read; the index needs none of them
                    if len(self.member_field) % 4096 == 0:
                        stop_if_abandoned()
                    self._add(number, path, member, seen)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UserError(f"{path}: not a readable uncompressed tar shard: {exc}") from None

    def _add(self, number: int, path: Path, member: tarfile.TarInfo, seen: set[str]) -> None:
        match = _NAME.match(member.name) if member.isfile() else None
        if match is None:
            return  # a folder entry, or a file with no extension: no field of any sample
        key, field = match.groups()
        if not self.keys or self.row_shard[-1] != number or self.keys[-1] != key:
            self.keys.append(key)
            self.row_shard.append(number)
            self.row_first.append(len(self.member_field))
            seen.clear()
        if field in seen:
            raise UserError(f"{path}: sample '{key}' has two files named .{field}")
        seen.add(field)
        self.member_field.append(self.fields.setdefault(field, len(self.fields)))
        self.member_offset.append(member.offset_data)
        self.member_size.append(member.size)

    def __len__(self) -> int:
        return len(self.keys)


def _value(field: str, data: bytes, key: str, where: str) -> Any:
    """A file's content as the library reads it, by its last extension."""
    kind = field.rsplit(".", 1)[-1].lower()
    try:
        if kind in AUDIO:
            return {"bytes": data, "path": f"{key}.{field}"}
        if kind in JSON:
            return json.loads(data)
        if kind in TEXT:
            return data.decode("utf-8")
        if kind in NUMBER:
            return int(data.decode("utf-8").strip())
    except (ValueError, RecursionError) as exc:  # a UnicodeDecodeError and a JSONDecodeError are ValueErrors
        raise UserError(f"{where}: {key}.{field}: not a readable .{kind} file: {exc}") from None
    return data


class WebDatasetTable(Table):
    """The samples of a split's shards, in shard order; light fields by a scan, rows by index."""

    def __init__(self, paths: list[Path], request: TableRequest):
        self.request, self.index = request, ShardIndex(paths)
        names = list(self.index.fields)
        self.columns = names + [KEY, URL]

    def scan(self) -> Iterator[dict[str, Any]]:
        fields = [f for f in self.request.fields if f in self.columns]
        return self._read(range(len(self.index)), fields)

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        wanted = range(len(self.index)) if indices is None else indices
        read = self.columns if columns is None else [c for c in self.columns if c in columns]
        return (only_columns(row, columns) for row in self._read(wanted, read))

    def _read(self, wanted: Sequence[int], columns: Sequence[str]) -> Iterator[dict[str, Any]]:
        index, fields = self.index, {self.index.fields[c]: c for c in columns if c in self.index.fields}
        handle: Optional[BinaryIO] = None
        shard = -1
        try:
            for row in wanted:
                if index.row_shard[row] != shard:
                    if handle is not None:
                        handle.close()
                    shard = index.row_shard[row]
                    handle = open(index.paths[shard], "rb") if fields else None
                yield self._row(row, handle, fields, columns)
        except OSError as exc:
            raise UserError(f"{index.paths[shard]}: shard not readable: {exc.strerror or exc}") from None
        finally:
            if handle is not None:
                handle.close()

    def _row(self, row: int, handle: Optional[BinaryIO], fields: dict[int, str], columns: Sequence[str]) -> dict[str, Any]:
        index = self.index
        key, path = index.keys[row], index.paths[index.row_shard[row]]
        values: dict[str, Any] = {name: None for name in columns}
        values.update({name: value for name, value in ((KEY, key), (URL, str(path))) if name in values})
        for member in range(index.row_first[row], index.row_first[row + 1]):
            name = fields.get(index.member_field[member])
            if name is None or handle is None:
                continue
            handle.seek(index.member_offset[member])
            data = handle.read(index.member_size[member])
            if len(data) != index.member_size[member]:
                raise UserError(f"{path}: {key}.{name} is cut short (the shard changed after it was opened?)")
            values[name] = _value(name, data, key, str(path))
        return values


@FORMATS.register("webdataset")
def _open_webdataset(path: Path, request: TableRequest) -> Table:
    return WebDatasetTable(shards(path, request.split, request.name), request)
