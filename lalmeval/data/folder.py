"""A local folder of data files: which files a dataset reads from it — every one, never silently one.

`datasets.load_dataset(folder)` picks the most common file type and drops the others, and drops
files whose names name no split when another file's name does. So lalmeval decides the files
itself, with the library's own split naming rules (`test.jsonl`, `data/test-00000-of-00002.parquet`,
`x_dev.csv`), and refuses a folder whose files it cannot all read for one split:

- files whose names name splits: the requested split's files, all of them; a data file that
  belongs to no split is an error (it would be left out);
- files whose names name no split: all of them are the one dataset, read whole (split `test`, the
  default, or `train`, the library's name for such files);
- files of several types for one split (jsonl and csv) are an error: one reader reads one type.

A folder the library describes itself (a hub snapshot whose README declares its configs), or one
with no data files of these types (an audio folder with its metadata, webdataset shards), is left
to `load_dataset`. Formats whose tools evaluate each file on its own (Twinkle Eval's folder,
EvalScope's subset files) read the folder file by file instead: see `per_file`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from lalmeval.errors import UserError

# Suffix → the `datasets` builder that reads it (and its delimiter).
READERS = {".parquet": ("parquet", None), ".jsonl": ("json", None), ".json": ("json", None), ".csv": ("csv", ","), ".tsv": ("csv", "\t")}
_METADATA = ("metadata.csv", "metadata.jsonl", "metadata.parquet")  # audiofolder / imagefolder layouts
PER_FILE_FORMATS = ("twinkle", "general_vqa", "general_vmcq")  # their tools score every file of a folder on its own


def data_files(folder: Path) -> list[Path]:
    """Every data file below `folder` (jsonl, json, csv, tsv, parquet), in name order; hidden ones left out."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if any(p.startswith(".") for p in parts) or not path.is_file() or path.suffix.lower() not in READERS:
            continue
        found.append(path)
    return found


# Data files read neither here nor beside plain ones: compressed data (x.jsonl.gz) and other spellings of
# JSON lines. Alone in a folder they go to `load_dataset`, which decompresses; next to plain files they
# would be left out of the dataset without a word, so they are refused.
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".zip")
_OTHER_DATA = (".ndjson",)


def unread_data_files(folder: Path) -> list[Path]:
    """Files below `folder` that hold data this reader does not read (compressed data files, .ndjson); hidden ones left out."""
    found = []
    for path in sorted(folder.rglob("*")):
        if any(p.startswith(".") for p in path.relative_to(folder).parts) or not path.is_file():
            continue
        suffixes = [x.lower() for x in path.suffixes]
        inner = suffixes[-2] if len(suffixes) >= 2 and suffixes[-1] in _COMPRESSED else None
        if inner in READERS or inner in _OTHER_DATA or (suffixes and suffixes[-1] in _OTHER_DATA):
            found.append(path)
    return found


def declares_configs(folder: Path) -> bool:
    """Whether the folder's README declares hub configs (a hub snapshot): then `load_dataset` knows its files."""
    readme = folder / "README.md"
    if not readme.is_file():
        return False
    head = readme.read_text(encoding="utf-8", errors="replace")
    return head.startswith("---") and "\nconfigs:" in head.split("\n---", 2)[0] + "\n"


@dataclass(frozen=True)
class FolderRead:
    """The files of one split of a folder, and the `datasets` builder that reads them."""

    files: tuple[Path, ...]
    builder: str
    delimiter: Optional[str]


def _by_split(folder: Path, files: list[Path]) -> dict[str, list[Path]]:
    """Split name → files, by the `datasets` library's own naming rules; {} when no name names a split."""
    from datasets.data_files import DataFilesDict, get_data_patterns

    patterns = get_data_patterns(str(folder))
    if list(patterns.values()) == [["**"]]:  # nothing names a split: the library's default, one split of everything
        return {}
    wanted = {p.resolve() for p in files}
    resolved = DataFilesDict.from_patterns(patterns, base_path=str(folder))
    return {str(split): [Path(f) for f in names if Path(f).resolve() in wanted] for split, names in resolved.items()}


def folder_read(folder: Path, split: str, name: str) -> Optional[FolderRead]:
    """What a dataset reads from a local folder for `split`; None to leave the folder to `load_dataset`."""
    files = data_files(folder)
    if not files or declares_configs(folder) or all(f.name in _METADATA for f in files):
        return None
    where = f"{folder}: dataset '{name}'"
    unread = unread_data_files(folder)
    if unread:
        raise UserError(f"{where}: {_shown(folder, unread)} hold(s) data lalmeval does not read beside plain data files "
                        f"({_shown(folder, files, 2)}), so they would be left out; decompress them (or save them as .jsonl), or move them out")
    chosen = split_files(folder, files, split, where)
    readers = {READERS[f.suffix.lower()] for f in chosen}
    if len(readers) > 1:
        raise UserError(f"{where}: the files of split '{split}' are of several types ({_shown(folder, chosen)}); one dataset is read by "
                        "one reader, so convert them to one type (or point hf_repo at one file)")
    builder, delimiter = readers.pop()
    return FolderRead(tuple(chosen), builder, delimiter)


def split_files(folder: Path, files: list[Path], split: str, where: str, what: str = "file") -> list[Path]:
    """The files of `split` by the hub's naming rules: every file when no name names a split (split
    `test` or `train`); a split that is missing, or a file that names none beside files that do, is an error."""
    splits = _by_split(folder, files)
    if not splits:
        if split not in ("test", "train"):  # lalmeval's default, and the library's name for files without split names
            raise UserError(f"{where}: split '{split}' — no {what} name here names a split, so the folder's {len(files)} {what}(s) are one "
                            f"dataset read whole; drop split, or name the {what}s by split (test.jsonl, dev.jsonl)")
        return files
    placed = {f.resolve() for group in splits.values() for f in group}
    stray = [f for f in files if f.resolve() not in placed]
    if stray:
        raise UserError(f"{where}: {_shown(folder, stray)} name(s) no split while other {what}s do ({', '.join(sorted(splits))}), "
                        "so they would be left out; name them by split (test.jsonl, test-2.jsonl) or move them out")
    if split not in splits:
        raise UserError(f"{where}: split '{split}' not found (have: {', '.join(sorted(splits))})")
    return sorted(splits[split])


def _shown(folder: Path, files: list[Path], most: int = 4) -> str:
    names = [str(f.relative_to(folder)) for f in files]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def per_file(folder: Path, name: str) -> list[tuple[str, Path]]:
    """(name, file) of each data file of a folder whose format scores every file on its own; the name
    is the file's path below the folder without its suffix (`basic_medical_science_train`). A file
    holding data this reader does not read (x.jsonl.gz) is refused: it would be a subset left out."""
    files = data_files(folder)
    unread = unread_data_files(folder)
    if unread and files:
        raise UserError(f"{folder}: dataset '{name}': {_shown(folder, unread)} hold(s) data lalmeval does not read beside plain data "
                        f"files ({_shown(folder, files, 2)}), so they would be left out; decompress them (or save them as .jsonl), or move them out")
    return [(str(f.relative_to(folder).with_suffix("")), f) for f in files]
