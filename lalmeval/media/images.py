"""Image references → the URL an OpenAI `image_url` part carries (file reads: call off the loop).

An image is a local path, an http(s) URL, a `data:` URI or raw bytes. Local files and bytes become
`data:<mime>;base64,...` URIs holding the bytes unchanged (never decoded, resized or re-encoded);
URLs and data URIs are sent as they are.

Relative paths: tried against `ImageRef.base` (the data file's folder, as audio paths are) first,
then against the working directory, which is EvalScope's convention (it opens the path as given,
so its examples name images from the folder the run starts in). The data file's folder wins when
both hold the file: a dataset that ships its images next to itself means those.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import mimetypes
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union
from urllib.parse import unquote, urlsplit

from lalmeval.files import data_path, system_tree
from lalmeval.text import clipped


class ImageError(ValueError):
    """An image that cannot be sent; the message is the reason recorded for the sample."""


@dataclass(frozen=True)
class ImageRef:
    """Where an image comes from: a path, an http(s) URL, a data: URI, or the image's bytes."""

    source: Union[str, bytes]
    base: Optional[Path] = None  # folder relative paths resolve against first (the data file's)

    def __repr__(self) -> str:
        return f"ImageRef({describe(self.source)}, base={str(self.base) if self.base else None!r})"


@dataclass(frozen=True)
class ImagePart:
    """What goes in one `image_url` part: the URL to send, the image's identity, its MIME type."""

    url: str
    digest: str                   # SHA-1 of the image bytes; of the URL itself for http(s) URLs
    mime: Optional[str] = None    # None for http(s) URLs: only the server that fetches them learns it
    detail: Optional[str] = None  # OpenAI's "auto" | "low" | "high", sent only when given

    def __repr__(self) -> str:
        return f"ImagePart({describe(self.url)}, digest={self.digest[:12]}, mime={self.mime!r}, detail={self.detail!r})"


# Types recognised from their first bytes; a file named like one of these must really be one.
_EXTENSIONS = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".jpe": "image/jpeg", ".jfif": "image/jpeg",
    ".gif": "image/gif", ".webp": "image/webp", ".bmp": "image/bmp", ".dib": "image/bmp", ".tif": "image/tiff",
    ".tiff": "image/tiff", ".heic": "image/heic", ".heif": "image/heif", ".avif": "image/avif",
}
SNIFFED = frozenset(_EXTENSIONS.values()) | {"image/svg+xml", "image/vnd.microsoft.icon", "image/jp2", "image/jxl"}
_AVIF = {b"avif", b"avis"}
_HEIC = {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx"}
_BMP_HEADERS = {12, 40, 52, 56, 64, 108, 124}  # the DIB header sizes BMP files use


def describe(source: Union[str, bytes]) -> str:
    """A short, printable name for an image source (bytes and data URIs are not printed whole)."""
    if isinstance(source, (bytes, bytearray)):
        return f"<{len(source)} bytes>"
    if source[:5].lower() == "data:":
        return f"<data URI {source[:source.find(',') if ',' in source[:200] else 30]!r}, {len(source)} chars>"
    return repr(source if len(source) <= 200 else source[:200] + "...")


def _heif_family(data: bytes) -> Optional[str]:
    """AVIF, HEIC or HEIF from an ISO-BMFF file's brands; None for other ISO-BMFF files such as MP4."""
    size = min(int.from_bytes(data[:4], "big"), len(data), 256)
    major, compatible = data[8:12], {data[i:i + 4] for i in range(16, size - 3, 4)}
    for brands in ({major}, compatible):  # the major brand decides before the compatible ones
        if brands & _AVIF:
            return "image/avif"
        if brands & _HEIC:
            return "image/heic"
    return "image/heif" if ({major} | compatible) & {b"mif1", b"msf1"} else None


def sniff(data: bytes) -> Optional[str]:
    """The image MIME type the first bytes announce; None when they are none of SNIFFED."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:2] == b"BM" and int.from_bytes(data[14:18], "little") in _BMP_HEADERS:
        return "image/bmp"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if data[4:8] == b"ftyp":
        return _heif_family(data)
    if data[:4] == b"\x00\x00\x01\x00" and int.from_bytes(data[4:6], "little") > 0:
        return "image/vnd.microsoft.icon"
    if data.startswith(b"\x00\x00\x00\x0cjP  \r\n\x87\n"):
        return "image/jp2"
    if data.startswith((b"\xff\x0a", b"\x00\x00\x00\x0cJXL \r\n\x87\n")):
        return "image/jxl"
    return "image/svg+xml" if _is_svg(data) else None


def _is_svg(data: bytes) -> bool:
    """SVG is text: an <svg> element near the start, after an XML declaration, comments or a doctype at most."""
    head = data[:4096].decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    return head.startswith(("<?xml", "<svg", "<!--", "<!DOCTYPE svg", "<!doctype svg")) and "<svg" in head


def _mime_of_file(data: bytes, path: Path) -> str:
    """MIME from the magic bytes alone: a file is sent only when its bytes are an image, whatever its name says."""
    mime = sniff(data)
    if mime:
        return mime  # the bytes say what they are even when the name says otherwise
    guessed = mimetypes.guess_type(path.name, strict=False)[0]
    named = _EXTENSIONS.get(path.suffix.lower()) or (guessed if guessed and guessed.startswith("image/") else None)
    if named:
        raise ImageError(f"image file is named like {named} but its bytes are not (starts {data[:8]!r}): {path}")
    raise ImageError(f"not a recognised image type (starts {data[:8]!r}): {path}")


def resolve(source: str, base: Optional[Path]) -> Path:
    """The file a local path names, by the rule audio paths follow too (lalmeval.files.data_path)."""
    path = Path(source).expanduser()
    found = data_path(source, base)
    if path.is_absolute() or os.path.lexists(found):
        return found
    candidates = ([base / path] if base is not None else []) + [Path.cwd() / path]
    raise ImageError(f"image file not found: {describe(source)} (looked for {' and '.join(clipped(str(c)) for c in candidates)})")


def read_file(path: Path, max_bytes: Optional[int] = None) -> bytes:
    """A regular file's bytes; a pipe, device, directory or system file is refused before it is opened."""
    tree = system_tree(str(path))
    if tree is not None:
        raise ImageError(f"image path is a system file under {tree}, never read: {path}")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ImageError(f"image file not readable: {exc.strerror or exc}: {path}") from None
    if not stat.S_ISREG(info.st_mode):
        # Opening a named pipe would block the reader for ever.
        raise ImageError(f"image path is {'a directory' if stat.S_ISDIR(info.st_mode) else 'not a regular file'}: {path}")
    if max_bytes is not None and info.st_size > max_bytes:
        raise ImageError(f"image file is {info.st_size} bytes, over the {max_bytes}-byte limit: {path}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"image file not readable: {exc.strerror or exc}: {path}") from None
    if not data:
        raise ImageError(f"image file is empty: {path}")
    return data


def decode_data_uri(uri: str) -> tuple[str, bytes]:
    """The MIME type and bytes of a `data:image/...;base64,...` URI; ImageError when it is not one."""
    comma = uri.find(",", 0, 256)
    head = uri[:comma].lower() if comma > 0 else ""
    fields = head[5:].split(";")
    if not head.startswith("data:") or len(fields) < 2 or fields[-1] != "base64":
        raise ImageError(f"data URI must be data:<mime>;base64,<data>: {describe(uri)}")
    mime = fields[0]
    if not mime.startswith("image/") or len(mime) <= 6:
        raise ImageError(f"data URI holds {mime or 'no MIME type'}, not an image: {describe(uri)}")
    try:
        data = base64.b64decode(uri[comma + 1:], validate=True)
    except (binascii.Error, ValueError):
        raise ImageError(f"data URI payload is not valid base64: {describe(uri)}") from None
    if not data:
        raise ImageError(f"data URI holds no bytes: {describe(uri)}")
    if sniff(data) is None:
        # A mislabelled image still reaches the model; bytes that are no image at all would not.
        raise ImageError(f"data URI says {mime} but its bytes are not an image (start {data[:8]!r})")
    return mime, data


def _from_bytes(data: bytes, detail: Optional[str]) -> ImagePart:
    mime = sniff(data)
    if mime is None:
        raise ImageError(f"image bytes are not a recognised image type (start {data[:8]!r}); expected one of {', '.join(sorted(SNIFFED))}")
    return ImagePart(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", hashlib.sha1(data).hexdigest(), mime, detail)


def _local_path(source: str) -> str:
    """The path of a file: URL, or the source itself; other URL schemes are refused."""
    scheme, _, rest = source.partition("://")
    if not rest or not scheme.isascii() or not scheme.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return source
    if scheme.lower() != "file":
        raise ImageError(f"unsupported image URL scheme {scheme!r} (use a local path, http(s) URL or data: URI): {describe(source)}")
    return unquote(urlsplit(source).path)


def local_file(ref: ImageRef) -> Optional[Path]:
    """The file a reference reads (relative paths resolved as `resolve` does); None for bytes, http(s) URLs
    and data: URIs. ImageError when no such file exists or the URL scheme is not read."""
    source = ref.source
    if not isinstance(source, str):
        return None
    source = source.strip()  # TSV and CSV cells often carry stray spaces or a newline
    if not source or source[:8].lower().startswith(("http://", "https://", "data:")):
        return None
    return resolve(_local_path(source), ref.base)


def image_url(ref: ImageRef, detail: Optional[str] = None, max_bytes: Optional[int] = None) -> ImagePart:
    """What one image_url part sends for `ref` (blocking: reads files); ImageError when it cannot be sent."""
    source = ref.source
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise ImageError("image bytes are empty")
        if max_bytes is not None and len(data) > max_bytes:
            raise ImageError(f"image is {len(data)} bytes, over the {max_bytes}-byte limit")
        return _from_bytes(data, detail)
    if not isinstance(source, str):
        raise ImageError(f"an image is a path, URL, data URI or bytes, not {type(source).__name__}")
    source = source.strip()  # TSV and CSV cells often carry stray spaces or a newline
    if not source:
        raise ImageError("image reference is empty")
    lowered = source[:8].lower()
    if lowered.startswith(("http://", "https://")):
        if not urlsplit(source).netloc or any(c.isspace() for c in source):
            raise ImageError(f"malformed image URL: {describe(source)}")
        return ImagePart(source, hashlib.sha1(source.encode()).hexdigest(), None, detail)
    if lowered.startswith("data:"):
        mime, data = decode_data_uri(source)
        if max_bytes is not None and len(data) > max_bytes:
            raise ImageError(f"data URI image is {len(data)} bytes, over the {max_bytes}-byte limit")
        return ImagePart(source, hashlib.sha1(data).hexdigest(), mime, detail)
    path = local_file(ref)
    assert path is not None
    data = read_file(path, max_bytes)
    mime = _mime_of_file(data, path)
    return ImagePart(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", hashlib.sha1(data).hexdigest(), mime, detail)


def is_missing(value: Any) -> bool:
    """True for an empty dataset cell: None, '', or the NaN that pandas-style readers leave."""
    return value is None or (isinstance(value, str) and not value.strip()) or (isinstance(value, float) and math.isnan(value))


_BASE64 = re.compile(r"[A-Za-z0-9+/_\-\s]+={0,2}\s*")
_SHORTEST_IMAGE = 64   # characters: no image file is smaller, and a path this long without a dot is rare


def raw_base64_image(text: str) -> Optional[bytes]:
    """A cell holding an image as bare base64 (no data: prefix), as some exports write it: its bytes when they
    decode (standard or URL-safe alphabet) to an image; None for anything else (a path, a URL)."""
    if len(text) < _SHORTEST_IMAGE or "." in text[:_SHORTEST_IMAGE] or not _BASE64.fullmatch(text):
        return None
    compact = re.sub(r"\s+", "", text)
    try:
        data = base64.b64decode(compact + "=" * (-len(compact) % 4), altchars=b"-_" if ("-" in compact or "_" in compact) else None,
                                validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if sniff(data) else None


def image_ref(value: Any, base: Optional[Path]) -> ImageRef:
    """An ImageRef from a dataset cell: a string, bytes, or a Hugging Face Image struct {bytes, path}."""
    if isinstance(value, dict):
        if value.get("bytes"):
            if not isinstance(value["bytes"], (bytes, bytearray, memoryview)):
                raise ImageError(f"image struct's 'bytes' holds {type(value['bytes']).__name__}, not bytes")
            return ImageRef(bytes(value["bytes"]), base)  # the bytes are the image; 'path' is then only its name
        if isinstance(value.get("path"), str) and value["path"].strip():
            return ImageRef(value["path"], base)
        raise ImageError(f"image struct has neither 'bytes' nor 'path' (keys: {', '.join(map(str, value)) or 'none'})")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ImageRef(bytes(value), base)
    if isinstance(value, str) and not is_missing(value):
        data = raw_base64_image(value)
        return ImageRef(data if data is not None else value, base)
    raise ImageError(f"an image cell must be a path, URL, data URI, bytes or {{bytes, path}}, not {'an empty value' if is_missing(value) else type(value).__name__}")
