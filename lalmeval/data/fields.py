"""Columns named by a path into an object: `json.text` is the `text` field of the object in column `json`.

Some layouts keep a row's fields inside one object — a webdataset sample's `json`, a parquet struct,
a JSONL object nested in a row. A runspec reaches a field of it by joining the column and the keys
with dots (`target_column: "json.text"`, `id_column: "json.meta.id"`). A real column of that name
wins; otherwise the longest head that is a column is the object, the rest its keys, one per dot (a
key that itself holds a dot cannot be reached). A row whose object lacks the key, or holds no
object there, has no value for it — as a missing cell, by the rules of lalmeval.data.cells.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

FieldPath = tuple[str, tuple[str, ...]]  # (column holding the object, keys into it)


def heads(names: Iterable[str]) -> list[str]:
    """Every dotted prefix of the names, with the names: what a table must read to resolve them later."""
    out: dict[str, None] = {}
    for name in names:
        parts = name.split(".")
        out.update(dict.fromkeys(".".join(parts[:cut]) for cut in range(1, len(parts))))
        out[name] = None
    return list(out)


def resolve(name: str, columns: Sequence[str]) -> Optional[FieldPath]:
    """(column, keys) when `name` is no column but a path into one; None when it is a column or no path."""
    if name in columns:
        return None
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in columns:
            return head, tuple(parts[cut:])
    return None


def paths_of(names: Iterable[str], columns: Sequence[str]) -> dict[str, FieldPath]:
    """{name: (column, keys)} of the names that are paths into the columns."""
    return {name: path for name in names if (path := resolve(name, columns)) is not None}


def physical(names: Iterable[str], paths: dict[str, FieldPath]) -> list[str]:
    """The columns to read for these names: a path's own column in its place."""
    return list(dict.fromkeys(paths[name][0] if name in paths else name for name in names))


def with_paths(row: dict[str, Any], paths: dict[str, FieldPath]) -> dict[str, Any]:
    """The row with each path's value under its dotted name (None where the object has no such field)."""
    for name, (column, keys) in paths.items():
        value = row.get(column)
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        row[name] = value
    return row
