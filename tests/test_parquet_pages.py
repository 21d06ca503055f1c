"""Binary columns (the audio bytes) read page by page give exactly what pyarrow reads, in every
layout writers produce; a layout the page reader does not handle is read by pyarrow instead."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lalmeval.data import tables
from lalmeval.data.parquet_pages import BinaryColumn, Unsupported

AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


LAYOUTS = [{}, {"compression": "none"}, {"compression": "zstd"}, {"compression": "gzip"}, {"compression": "brotli"},
           {"use_dictionary": False}, {"data_page_version": "2.0"}, {"data_page_version": "2.0", "compression": "none"},
           {"row_group_size": 300}, {"data_page_size": 2000}, {"dictionary_pagesize_limit": 500}, {"write_statistics": False}]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[json.dumps(layout) for layout in LAYOUTS])
def test_binary_columns_read_page_by_page_equal_what_pyarrow_reads(tmp_path, monkeypatch, layout):
    """Nulls, empty values, repeated values (dictionary pages and the fallback to PLAIN), structs,
    required columns, every codec and both data page versions: the same rows as pyarrow reads."""
    rng = random.Random(7)
    count = 1000
    values = [None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, 600)) for _ in range(count)]
    repeated = [values[rng.randint(0, 20)] for _ in range(count)]
    clips = [None if rng.random() < 0.05 else {"bytes": v, "path": None if rng.random() < 0.5 else f"c{i}.wav"} for i, v in enumerate(values)]
    schema = pa.schema([("id", pa.string()), ("blob", pa.binary()), ("repeated", pa.binary()), ("audio", AUDIO), pa.field("required", pa.binary(), nullable=False)])
    table = pa.table([[f"r{i}" for i in range(count)], values, repeated, clips, [rng.randbytes(9) for _ in range(count)]], schema=schema)
    path = tmp_path / "layout.parquet"
    pq.write_table(table, path, **layout)
    monkeypatch.setattr(tables, "HEAVY_BYTES", 0)  # every binary column page by page, however small
    parquet = tables.ParquetTable(path, tables.TableRequest(["id"], "d"))
    handle = pq.ParquetFile(path)
    # The page reader really reads the binary columns (and only those: a string column reads as text).
    assert sorted(tables.heavy_columns(handle, parquet.open, 0, parquet.columns)) == ["audio.bytes", "blob", "repeated", "required"]
    assert list(parquet.rows(None)) == table.to_pylist()
    picked = sorted(rng.sample(range(count), 77))
    assert list(parquet.rows(picked, ["id", "audio"])) == [{"id": r["id"], "audio": r["audio"]} for r in (table.to_pylist()[i] for i in picked)]


def test_a_column_the_page_reader_cannot_read_is_left_to_pyarrow(tmp_path):
    path = tmp_path / "delta.parquet"
    pq.write_table(pa.table({"blob": [b"abc", b"de"]}), path, use_dictionary=False, column_encoding={"blob": "DELTA_LENGTH_BYTE_ARRAY"})
    handle = pq.ParquetFile(path)
    with pytest.raises(Unsupported):
        BinaryColumn(lambda: open(path, "rb"), handle.metadata.row_group(0).column(0), 1, 0)
    parquet = tables.ParquetTable(path, tables.TableRequest([], "d"))
    assert list(parquet.rows(None)) == [{"blob": b"abc"}, {"blob": b"de"}]
