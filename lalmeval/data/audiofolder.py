"""An audio folder as the hub's `audiofolder` lays it out: audio files and a `metadata.csv`,
`metadata.jsonl` or `metadata.parquet` whose `file_name` column names each row's file, relative to
the metadata file's folder — in split folders (`test/`, `train/`) or under names that say the split.

`datasets` reads it by decoding every clip through torchcodec; here the metadata files are read
as the tables they are (lalmeval.data.tables: streamed, by offset, by page) and the named files stay
paths, read — and checked against the data's folders (lalmeval.data.confine) — when their row is.
Columns are the library's: `file_name` becomes `audio` (`<x>_file_name` becomes `<x>`, and
`file_names` / `<x>_file_names` lists of clips), and `file_name` is kept too, as a ready id.
A folder without metadata has one row per audio file (`audio`), with `label` the name of its
folder when the files lie in several folders at one depth, as the library labels them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from lalmeval.data.folder import data_files, declares_configs, split_files
from lalmeval.data.tables import FORMATS, ChainTable, MemoryTable, Table, TableRequest, only_columns
from lalmeval.errors import UserError

METADATA = ("metadata.csv", "metadata.jsonl", "metadata.parquet")
# The library's audiofolder extensions, and the containers PyAV reads beside them (m4a, aac).
EXTENSIONS = {".aiff", ".au", ".avr", ".caf", ".flac", ".htk", ".svx", ".mat4", ".mat5", ".mpc2k", ".ogg", ".paf", ".pvf", ".raw",
              ".rf64", ".sd2", ".sds", ".ircam", ".voc", ".w64", ".wav", ".nist", ".wavex", ".wve", ".xi", ".mp3", ".opus", ".3gp",
              ".3g2", ".avi", ".asf", ".flv", ".mp4", ".mov", ".m4v", ".mkv", ".mpg", ".webm", ".f4v", ".wmv", ".wma", ".ogm", ".mxf",
              ".nut", ".m4a", ".aac", ".amr"}


def _visible(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts):
            yield path


def is_audiofolder(folder: Path) -> bool:
    """Whether the folder is laid out as an audio folder: audio files, and data files only as metadata."""
    if declares_configs(folder) or any(f.name not in METADATA for f in data_files(folder)):
        return False
    return any(path.suffix.lower() in EXTENSIONS for path in _visible(folder))


def _clip_columns(columns: Sequence[str]) -> dict[str, str]:
    """{column made: metadata column naming files} by the library's rule."""
    made = {}
    for column in columns:
        if column == "file_name" or column.endswith("_file_name"):
            made[column[: -len("_file_name")] or "audio"] = column
        elif column == "file_names" or column.endswith("_file_names"):
            made[column[: -len("_file_names")] or "audios"] = column
    return made


class _MetadataTable(Table):
    """One metadata file's rows, with the files they name as clips {bytes: None, path} beside the metadata file."""

    def __init__(self, path: Path, request: TableRequest):
        source_fields = [*request.fields, "file_name", "file_names", *(f"{f}_file_name" for f in request.fields),
                         *(f"{f}_file_names" for f in request.fields)]
        self.path, self.fields = path, request.fields
        self.table = FORMATS.get(path.suffix.lower().lstrip("."))(path, TableRequest(source_fields, request.name))
        self.made = _clip_columns(self.table.columns)
        if not self.made:
            raise UserError(f"{path}: dataset '{request.name}': an audio folder's metadata names its files in a 'file_name' column "
                            f"(or '<name>_file_name', 'file_names'); its columns are {', '.join(self.table.columns)}")
        self.columns = list(dict.fromkeys([*self.made, *self.table.columns]))

    def _with_clips(self, row: dict[str, Any]) -> dict[str, Any]:
        for made, column in self.made.items():
            row[made] = _clips(row.get(column), self.path.parent)
        return row

    def scan(self) -> Optional[Iterator[dict[str, Any]]]:
        scan = self.table.scan()
        return None if scan is None else ({f: row.get(f) for f in self.fields} for row in map(self._with_clips, scan))

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        read = None if columns is None else list(dict.fromkeys(self.made.get(c, c) for c in columns))
        return (only_columns(self._with_clips(row), columns) for row in self.table.rows(indices, read))


def _clips(value: Any, folder: Path) -> Any:
    """A file name (or a list of them) as clip structs with the path beside the metadata file; anything
    else is left as it is (the row then fails with the reason the audio reader gives)."""
    if isinstance(value, str) and value:
        return {"bytes": None, "path": str(folder / value)}
    if isinstance(value, (list, tuple)):
        return [_clips(item, folder) for item in value]
    return value


def _labelled(folder: Path, audio: list[Path]) -> tuple[list[str], list[dict[str, Any]]]:
    """A folder without metadata: a row per audio file, labelled by its folder's name when the files
    lie in several folders at one depth (the library's rule)."""
    labels = {path.parent.name for path in audio}
    depths = {len(path.relative_to(folder).parts) for path in audio}
    labelled = len(labels) > 1 and len(depths) == 1
    rows = [{"audio": {"bytes": None, "path": str(path)}, "file_name": str(path.relative_to(folder)),
             **({"label": path.parent.name} if labelled else {})} for path in audio]
    return ["audio", "file_name", *(["label"] if labelled else [])], rows


@FORMATS.register("audiofolder")
def _open_audiofolder(folder: Path, request: TableRequest) -> Table:
    files = [path for path in _visible(folder) if path.name in METADATA or path.suffix.lower() in EXTENSIONS]
    chosen = split_files(folder, files, request.split, f"{folder}: dataset '{request.name}'")
    metadata = [path for path in chosen if path.name in METADATA]
    if not metadata:
        columns, rows = _labelled(folder, chosen)
        return MemoryTable(columns, rows, request.fields)
    kinds = {path.suffix.lower() for path in metadata}
    if len(kinds) > 1:
        raise UserError(f"{folder}: dataset '{request.name}': metadata files of several types in split '{request.split}' "
                        f"({', '.join(str(p.relative_to(folder)) for p in metadata)}); keep one type")
    return ChainTable([_MetadataTable(path, request) for path in metadata])
