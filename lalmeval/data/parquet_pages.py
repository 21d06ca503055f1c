"""The values of one large binary column of a parquet row group, read page by page (the audio bytes).

pyarrow decodes a column chunk into Arrow arrays and keeps a dictionary page's decoded copy for the
whole chunk; pyarrow and pandas write a file in one row group by default, with up to 1024 clips in
one page, so reading its audio holds about three copies of its largest pages at once. This reader
holds one page: its bytes are read, decompressed (the compressed copy then dropped), and its values
handed out as slices of the decompressed buffer, which goes when the next page is read.

Only what writers produce for such a column is read here — BYTE_ARRAY values, PLAIN or dictionary
encoded, in data pages v1 or v2, without repetition (no lists), in a codec pyarrow can decompress;
`BinaryColumn` raises Unsupported for anything else, and the caller reads the column with pyarrow.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, Callable, Iterator, Optional

import numpy as np

_CODECS = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "ZSTD": "zstd", "BROTLI": "brotli", "LZ4_RAW": "lz4_raw"}
_ENCODINGS = {"PLAIN", "RLE", "RLE_DICTIONARY", "PLAIN_DICTIONARY"}
PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY = 0, 2, 8
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3
HEADER_READ = 1 << 16  # bytes read to find a page header (a header with large statistics is read again, whole)


class Unsupported(Exception):
    """A column layout this reader does not handle (the caller reads it through pyarrow)."""


class Malformed(ValueError):
    """The file's bytes are not what its metadata says."""


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _value(buf: Any, pos: int, kind: int) -> tuple[Any, int]:
    """One value of the Thrift compact protocol (parquet's page headers are written in it)."""
    if kind in (1, 2):
        return kind == 1, pos
    if kind == 3:
        return struct.unpack_from("b", buf, pos)[0], pos + 1
    if kind in (4, 5, 6):
        raw, pos = _varint(buf, pos)
        return _zigzag(raw), pos
    if kind == 7:
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if kind == 8:
        size, pos = _varint(buf, pos)
        if pos + size > len(buf):
            raise IndexError("binary field runs past the buffer")
        return bytes(buf[pos : pos + size]), pos + size
    if kind in (9, 10):
        return _list(buf, pos)
    if kind == 11:
        return _map(buf, pos)
    if kind == 12:
        return _struct(buf, pos)
    raise Malformed(f"unknown Thrift type {kind} in a page header")


def _list(buf: Any, pos: int) -> tuple[list[Any], int]:
    head = buf[pos]
    size, kind = head >> 4, head & 0x0F
    pos += 1
    if size == 15:
        size, pos = _varint(buf, pos)
    items = []
    for _ in range(size):
        if kind in (1, 2):  # a boolean element is a byte of its own
            items.append(buf[pos] == 1)
            pos += 1
        else:
            item, pos = _value(buf, pos, kind)
            items.append(item)
    return items, pos


def _map(buf: Any, pos: int) -> tuple[list[tuple[Any, Any]], int]:
    size, pos = _varint(buf, pos)
    if not size:
        return [], pos
    kinds = buf[pos]
    pos += 1
    pairs = []
    for _ in range(size):
        key, pos = _value(buf, pos, kinds >> 4)
        value, pos = _value(buf, pos, kinds & 0x0F)
        pairs.append((key, value))
    return pairs, pos


def _struct(buf: Any, pos: int) -> tuple[dict[int, Any], int]:
    """A Thrift struct as {field id: value}."""
    fields: dict[int, Any] = {}
    last = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return fields, pos
        delta, kind = head >> 4, head & 0x0F
        if delta:
            field = last + delta
        else:
            raw, pos = _varint(buf, pos)
            field = _zigzag(raw)
        fields[field], pos = _value(buf, pos, kind)
        last = field


def hybrid(buf: Any, width: int, count: int, pos: int = 0) -> np.ndarray:
    """`count` values of parquet's RLE / bit-packed hybrid encoding (levels, dictionary indices)."""
    out = np.zeros(count, dtype=np.int64)
    if width == 0:
        return out
    at, size = 0, (width + 7) // 8
    weights = np.left_shift(1, np.arange(width, dtype=np.int64))
    while at < count:
        header, pos = _varint(buf, pos)
        if header & 1:  # bit-packed: groups of 8 values, least significant bit first
            groups = header >> 1
            raw = np.frombuffer(buf, dtype=np.uint8, count=groups * width, offset=pos)
            pos += groups * width
            values = np.unpackbits(raw, bitorder="little").reshape(-1, width).astype(np.int64) @ weights
        else:  # a run of one value
            values = np.full(header >> 1, int.from_bytes(bytes(buf[pos : pos + size]), "little"), dtype=np.int64)
            pos += size
        take = min(len(values), count - at)
        out[at : at + take] = values[:take]
        at += take
    return out


def _plain(buf: Any, count: int, pos: int = 0) -> list[memoryview]:
    """`count` PLAIN byte arrays (a 4-byte length, then the bytes), as slices of `buf`."""
    view = memoryview(buf).cast("B")
    values = []
    for _ in range(count):
        (size,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if pos + size > len(view):
            raise Malformed("a value runs past the end of its page")
        values.append(view[pos : pos + size])
        pos += size
    return values


class BinaryColumn:
    """The values of one BYTE_ARRAY leaf column in one row group: bytes per row, or None.
    `opener` opens the file (a local one, or a remote one through fsspec)."""

    def __init__(self, opener: Callable[[], BinaryIO], chunk: Any, max_definition: int, max_repetition: int):
        if chunk.physical_type != "BYTE_ARRAY" or max_repetition:
            raise Unsupported("not a flat binary column")
        if chunk.compression not in _CODECS or not set(chunk.encodings) <= _ENCODINGS:
            raise Unsupported(f"codec {chunk.compression}, encodings {chunk.encodings}")
        self.opener, self.codec, self.max_definition = opener, _CODECS[chunk.compression], max_definition
        offsets = [o for o in (chunk.dictionary_page_offset, chunk.data_page_offset) if o]  # 0 or None: absent
        self.start = min(offsets) if offsets else chunk.data_page_offset
        self.end = self.start + chunk.total_compressed_size
        self.rows = chunk.num_values

    def values(self) -> Iterator[Optional[bytes]]:
        """Every row's value, in order (None for a null)."""
        dictionary: Optional[list[memoryview]] = None
        produced = 0
        with self.opener() as handle:
            pos = self.start
            while pos < self.end and produced < self.rows:
                header, body_at = self._header(handle, pos)
                size = header.get(3, 0)
                handle.seek(body_at)
                kind, pos = header.get(1), body_at + size
                if kind == DICTIONARY_PAGE:
                    dictionary = _plain(self._decompress(handle.read(size), header[2]), header[7][1])
                    continue
                if kind not in (DATA_PAGE, DATA_PAGE_V2):
                    continue  # an index page: nothing to read
                encoding = (header.get(8) or header.get(5) or {}).get(4 if 8 in header else 2)
                if encoding not in (PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY):
                    raise Malformed(f"page encoding {encoding} where the metadata lists {', '.join(_ENCODINGS)}")
                if encoding == PLAIN:
                    # A writer that fell back to PLAIN does not return to the dictionary: let it go
                    # before this page is read, so the two are never in memory together.
                    dictionary = None
                elif dictionary is None:
                    raise Malformed("a dictionary-encoded page without a dictionary page before it")
                levels, page = self._data_page(handle.read(size), header)
                defined = int((levels == self.max_definition).sum())
                values = iter(_plain(page, defined) if encoding == PLAIN else self._indexed(page, defined, dictionary))
                for level in levels:
                    # A copy, not a slice: a value kept by the caller must not keep its page in memory.
                    yield bytes(next(values)) if level == self.max_definition else None
                produced += len(levels)
                del page, values  # before the next page is read: one page in memory at a time

    def _header(self, handle: Any, pos: int) -> tuple[dict[int, Any], int]:
        """A page header at `pos`, and where the page's bytes start."""
        read = HEADER_READ
        while True:
            handle.seek(pos)
            buf = handle.read(min(read, self.end - pos))
            try:
                header, length = _struct(buf, 0)
                return header, pos + length
            except IndexError:
                if len(buf) < read:
                    raise Malformed("a page header runs past the end of its column chunk") from None
                read *= 4

    def _decompress(self, raw: bytes, size: int) -> Any:
        if self.codec is None:
            return raw
        import pyarrow as pa

        return pa.decompress(raw, decompressed_size=size, codec=self.codec)

    def _data_page(self, raw: bytes, header: dict[int, Any]) -> tuple[np.ndarray, Any]:
        """(definition levels, the values' bytes) of a data page."""
        if 8 in header:  # v2: levels first, never compressed; the values compressed or not
            info = header[8]
            count, repetition, definition = info[1], info.get(6, 0), info.get(5, 0)
            levels = hybrid(raw[repetition : repetition + definition], _width(self.max_definition), count)
            rest = raw[repetition + definition :]
            page = self._decompress(rest, header[2] - repetition - definition) if info.get(7, True) else rest
            return levels, page
        info = header[5]
        count = info[1]
        page = self._decompress(raw, header[2])
        if not self.max_definition:
            return np.full(count, 0, dtype=np.int64), page
        (length,) = struct.unpack_from("<I", page, 0)
        levels = hybrid(memoryview(page)[4 : 4 + length], _width(self.max_definition), count)
        return levels, memoryview(page)[4 + length :]

    @staticmethod
    def _indexed(page: Any, count: int, dictionary: list[memoryview]) -> Iterator[memoryview]:
        view = memoryview(page).cast("B")
        for index in hybrid(view, view[0], count, pos=1):
            yield dictionary[index]


def _width(value: int) -> int:
    return int(value).bit_length()
