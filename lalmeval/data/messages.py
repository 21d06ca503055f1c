"""Content parts in send order: OpenAI-format conversations and `<image k>` questions → typed parts → JSON.

Decisions (EvalScope general_vqa / general_vmcq):
- System messages (and "developer" ones) are joined with newlines into one system prompt,
  wherever they stand; they hold text only.
- Assistant messages in the input are kept, in place, as context (few-shot examples). They hold
  text only, and the conversation must end with a user message: the reply is what is scored.
- `<image k>` / `<image_k>` with no k-th image is an error, not silently dropped: a question that
  refers to a picture the model never sees is not the question the dataset asks.
- Images no placeholder refers to are appended after the text, in order (then unreferenced audio),
  so a question without placeholders still carries its images; a placeholder used twice sends
  the image twice.
- `image_1..image_100` are numbered without gaps: collection stops at the first missing one, and a
  later one that is present is an error rather than an image silently left out.
- Audio in a message list stands where its part stands: `input_audio` {data: base64 or a data URI,
  format} and `audio_url` {url: a data URI or a local path relative to the data file}. Clips are
  decoded and resampled like any other, so an http(s) URL is not fetched: that row fails, saying so.
- `<audio k>` puts the sample's k-th clip (1-based) where it stands, like `<image k>`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from lalmeval.files import data_path
from lalmeval.media.images import ImageError, ImagePart, ImageRef, image_ref, image_url, is_missing
from lalmeval.results.records import AudioRef
from lalmeval.text import mended

MAX_IMAGES = 100  # EvalScope's image_1..image_100


@dataclass(frozen=True)
class Text:
    """A text part."""

    text: str


@dataclass(frozen=True)
class Image:
    """An image part: where the image comes from, and OpenAI's detail hint if the data gives one."""

    ref: ImageRef
    detail: Optional[str] = None


@dataclass(frozen=True)
class Audio:
    """The sample's clip number `index` (0-based) goes here; its JSON part is built by the caller."""

    index: int


Part = Union[Text, Image, Audio]


@dataclass(frozen=True)
class Turn:
    """One user or assistant message."""

    role: str  # "user" | "assistant"
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Conversation:
    """A system prompt and the turns to send; the last turn is the user's. `audio` holds the clips a
    message list carries itself: its Audio parts index them (the sample's first clips)."""

    system: Optional[str]
    turns: tuple[Turn, ...]
    audio: tuple[AudioRef, ...] = ()

    @classmethod
    def user(cls, parts: Iterable[Part], system: Optional[str] = None) -> "Conversation":
        """A single user turn, e.g. what interleave() makes of a question."""
        return cls(system, (Turn("user", tuple(parts)),))

    def parts(self) -> Iterator[Part]:
        """Every part of every turn, in send order."""
        return (part for turn in self.turns for part in turn.parts)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {str: "a string", list: "a list", dict: "an object", bool: "a boolean", int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {_kind(value)}")
    return value


def _image(part: dict, where: str, base: Optional[Path]) -> Image:
    body = part.get("image_url")
    if not isinstance(body, dict):
        raise ValueError(f"{where}.image_url: expected an object {{url, detail}}, got {_kind(body)}")
    url = _text(body.get("url"), f"{where}.image_url.url")
    if not url.strip():
        raise ValueError(f"{where}.image_url.url: empty")
    detail = body.get("detail")
    if detail is not None and (not isinstance(detail, str) or not detail):
        raise ValueError(f"{where}.image_url.detail: expected a string such as 'auto', 'low' or 'high', got {_kind(detail)}")
    return Image(ImageRef(url, base), detail)


_DATA_URI = re.compile(r"data:[^,;]*(?:;[^,;]*)*;base64,(.*)", re.S)


def _decoded(payload: str, where: str) -> bytes:
    try:
        data = base64.b64decode(payload.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{where}: not valid base64") from None
    if not data:
        raise ValueError(f"{where}: empty")
    return data


def _clip(value: Any, where: str, base: Optional[Path], bare_base64: bool) -> AudioRef:
    """A clip from a message part: a data URI, base64 (input_audio), or a local path (relative to the data file)."""
    text = _text(value, where).strip()
    if not text:
        raise ValueError(f"{where}: empty")
    if text.startswith("data:"):
        found = _DATA_URI.fullmatch(text)
        if not found:
            raise ValueError(f"{where}: a data URI must be base64 (data:audio/wav;base64,...)")
        return AudioRef(_decoded(found.group(1), where))
    if text.startswith(("http://", "https://")):
        raise ValueError(f"{where}: audio at an http(s) URL is not fetched (clips are decoded and resampled here); "
                         "give a local path, base64 or a data URI")
    if bare_base64 and "." not in text:  # base64 has no dot; a file name has one
        return AudioRef(_decoded(text, where))
    return AudioRef(str(data_path(text.removeprefix("file://"), base)))


def _audio_part(part: dict, kind: str, where: str, base: Optional[Path]) -> AudioRef:
    body = part.get(kind)
    if kind == "input_audio":
        if not isinstance(body, dict):
            raise ValueError(f"{where}.input_audio: expected an object {{data, format}}, got {_kind(body)}")
        return _clip(body.get("data"), f"{where}.input_audio.data", base, bare_base64=True)
    if isinstance(body, str):  # a bare URL string, as some writers store it
        return _clip(body, f"{where}.audio_url", base, bare_base64=False)
    if not isinstance(body, dict):
        raise ValueError(f"{where}.audio_url: expected an object {{url}}, got {_kind(body)}")
    return _clip(body.get("url"), f"{where}.audio_url.url", base, bare_base64=False)


def _parts(content: Any, where: str, base: Optional[Path], clips: list[AudioRef]) -> tuple[Part, ...]:
    """A message's content (a string, or a list of text / image_url / input_audio / audio_url parts) as parts;
    the clips found are appended to `clips` and referenced by index."""
    if isinstance(content, str):
        if not content.strip():
            raise ValueError(f"{where}.content: empty")
        return (Text(content),)
    if not isinstance(content, list) or not content:
        raise ValueError(f"{where}.content: expected a string or a non-empty list of parts, got {_kind(content) if content != [] else 'an empty list'}")
    parts: list[Part] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(Text(_text(part.get("text"), f"{at}.text")))
        elif kind == "image_url":
            parts.append(_image(part, at, base))
        elif kind in ("input_audio", "audio_url"):
            clips.append(_audio_part(part, kind, at, base))
            parts.append(Audio(len(clips) - 1))
        elif isinstance(part, dict):
            raise ValueError(f"{at}.type: {kind!r} is not supported (text, image_url, input_audio or audio_url)")
        else:
            raise ValueError(f"{at}: expected an object with a type, got {_kind(part)}")
    return tuple(parts)


def _load(messages: Union[str, list]) -> list:
    if isinstance(messages, str):  # TSV cells hold the list as JSON text
        try:
            messages = mended(json.loads(messages))  # "\ud800" in the text decodes to a string no request can carry
        except json.JSONDecodeError as exc:
            raise ValueError(f"messages: not valid JSON ({exc})") from None
        except RecursionError:
            raise ValueError("messages: not valid JSON (nested too deeply)") from None
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"messages: expected a non-empty list of {{role, content}}, got {_kind(messages) if messages != [] else 'an empty list'}")
    return messages


def from_openai_messages(messages: Union[str, list], base: Optional[Path]) -> Conversation:
    """An EvalScope general_vqa `messages` value (list, or its JSON text) as a Conversation; ValueError names the field."""
    system: list[str] = []
    turns: list[Turn] = []
    clips: list[AudioRef] = []
    for i, message in enumerate(_load(messages)):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ValueError(f"{where}: expected an object {{role, content}}, got {_kind(message)}")
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant"):
            raise ValueError(f"{where}.role: {role!r} is not one of 'system', 'user', 'assistant'")
        parts = _parts(message.get("content"), where, base, clips)
        if role != "user" and not all(isinstance(p, Text) for p in parts):
            raise ValueError(f"{where}.content: {role} messages hold text only")
        if role in ("system", "developer"):
            system.append("\n".join(p.text for p in parts))  # type: ignore[union-attr]
        else:
            turns.append(Turn(role, parts))
    if not turns or turns[-1].role != "user":
        last = f"'{turns[-1].role}'" if turns else "none"
        raise ValueError(f"messages: the conversation must end with a user message (last turn: {last}); the reference answer goes in 'answer'")
    return Conversation("\n".join(system) if system else None, tuple(turns), tuple(clips))


_PLACEHOLDER = re.compile(r"<(image|audio)[ _](\d+)>")


def _missing(match: re.Match, count: int) -> ValueError:
    kind, k = match.group(1), int(match.group(2))
    if kind == "image" and k > MAX_IMAGES:
        return ValueError(f"{match.group(0)}: placeholders go up to <image {MAX_IMAGES}>")
    has = f"{count} image{'s' if count != 1 else ''}" if kind == "image" else f"{count} audio clip{'s' if count != 1 else ''}"
    return ValueError(f"{match.group(0)} refers to {kind} {k}, but the sample has {has}")


def has_placeholder(text: Optional[str]) -> bool:
    """Whether `text` places an image or a clip (`<image k>`, `<audio k>`)."""
    return bool(text) and _PLACEHOLDER.search(text) is not None


def check_placeholders(texts: Iterable[Optional[str]], images: int, audios: int, why_no_audio: str = "") -> None:
    """Every `<image k>` / `<audio k>` in `texts` names an image or clip the sample has: a question about a
    picture or a sound the model never gets is not the dataset's question (ValueError names the placeholder)."""
    for text in texts:
        for match in _PLACEHOLDER.finditer(text or ""):
            kind, k = match.group(1), int(match.group(2))
            count = images if kind == "image" else audios
            if not 1 <= k <= count or (kind == "image" and k > MAX_IMAGES):
                error = _missing(match, count)
                raise ValueError(f"{error}{why_no_audio}" if kind == "audio" and not audios and why_no_audio else str(error))


def interleave(text: str, images: Sequence[ImageRef], audios: int = 0) -> list[Part]:
    """`text` with each `<image k>` (1-based) replaced by images[k-1] and `<audio k>` by Audio(k-1), in place.

    Spaces and tabs next to a placeholder are dropped (newlines kept: they lay out options);
    whitespace-only pieces vanish. Unreferenced images, then unreferenced clips, follow the text."""
    pieces = _PLACEHOLDER.split(text)  # text, kind, number, text, kind, number, ..., text
    parts: list[Part] = []
    used_images: set[int] = set()
    used_audio: set[int] = set()
    for n, match in enumerate(_PLACEHOLDER.finditer(text)):
        segment = pieces[3 * n]
        _add_text(parts, segment.lstrip(" \t") if n else segment, strip_end=True)
        kind, k = match.group(1), int(match.group(2))
        count = len(images) if kind == "image" else audios
        if not 1 <= k <= count or (kind == "image" and k > MAX_IMAGES):
            raise _missing(match, count)
        if kind == "image":
            parts.append(Image(images[k - 1]))
            used_images.add(k - 1)
        else:
            parts.append(Audio(k - 1))
            used_audio.add(k - 1)
    last = pieces[-1]
    _add_text(parts, last.lstrip(" \t") if len(pieces) > 1 else last, strip_end=False)
    parts.extend(Image(ref) for i, ref in enumerate(images) if i not in used_images)
    parts.extend(Audio(i) for i in range(audios) if i not in used_audio)
    return parts


def _add_text(parts: list[Part], segment: str, strip_end: bool) -> None:
    segment = segment.rstrip(" \t") if strip_end else segment
    if segment.strip():
        parts.append(Text(segment))


_IMAGE_PLACEHOLDER = re.compile(r"<image[ _](\d+)>")


def place_images(conversation: Conversation, images: Sequence[ImageRef]) -> Conversation:
    """EvalScope's newer general_vqa layout: `<image k>` in a message's text, the image in column image_k. Each
    placeholder becomes its image where it stands, images no placeholder names follow the last user message;
    a placeholder without its image is a ValueError (the question would be sent about a picture never shown)."""
    used: set[int] = set()
    turns = []
    for i, turn in enumerate(conversation.turns):
        parts: list[Part] = []
        for part in turn.parts:
            if not (isinstance(part, Text) and _IMAGE_PLACEHOLDER.search(part.text)):
                parts.append(part)
            elif turn.role != "user":
                raise ValueError(f"messages: {_IMAGE_PLACEHOLDER.search(part.text).group(0)} in an {turn.role} message: images go in user messages")
            else:
                parts += _with_images(part.text, images, used)
        turns.append(Turn(turn.role, tuple(parts)))
    rest = tuple(Image(ref) for k, ref in enumerate(images) if k not in used)
    if rest:
        turns[-1] = Turn(turns[-1].role, turns[-1].parts + rest)
    return Conversation(conversation.system, tuple(turns), conversation.audio)


def _with_images(text: str, images: Sequence[ImageRef], used: set[int]) -> list[Part]:
    """One text part with each `<image k>` replaced by images[k-1] in place (spaces next to it dropped)."""
    pieces = _IMAGE_PLACEHOLDER.split(text)   # text, number, text, number, ..., text
    parts: list[Part] = []
    for n, match in enumerate(_IMAGE_PLACEHOLDER.finditer(text)):
        _add_text(parts, pieces[2 * n].lstrip(" \t") if n else pieces[2 * n], strip_end=True)
        k = int(match.group(1))
        if not 1 <= k <= min(len(images), MAX_IMAGES):
            raise ValueError(f"messages: {match.group(0)} refers to image {k}, but the sample has {len(images)} "
                             f"(columns image_1 .. image_{MAX_IMAGES} hold them)")
        parts.append(Image(images[k - 1]))
        used.add(k - 1)
    _add_text(parts, pieces[-1].lstrip(" \t"), strip_end=False)
    return parts


_IMAGE_COLUMN = re.compile(r"image_([1-9][0-9]*)")


def vmcq_images(row: Mapping[str, Any], base: Optional[Path]) -> list[ImageRef]:
    """The images of a general_vmcq row: image_1, image_2, ... (else an `images` list), in order."""
    present = sorted(int(m.group(1)) for key, value in row.items() if (m := _IMAGE_COLUMN.fullmatch(str(key))) and not is_missing(value))
    if present:
        if present[-1] > MAX_IMAGES:
            raise ImageError(f"image_{present[-1]}: a sample holds at most {MAX_IMAGES} images (image_1..image_{MAX_IMAGES})")
        gap = next(k for k in range(1, len(present) + 2) if k not in present)
        if gap < present[-1]:
            later = next(k for k in present if k > gap)
            raise ImageError(f"image_{later} is given but image_{gap} is missing; image columns are numbered without gaps")
        named = [(f"image_{k}", row[f"image_{k}"]) for k in present]
    else:
        listed = row.get("images")  # EvalScope's alternative: one list column
        if is_missing(listed) or (isinstance(listed, (list, tuple)) and not listed):
            return []
        if not isinstance(listed, (list, tuple)):
            raise ImageError(f"images: expected a list of images, got {_kind(listed)}")
        named = [(f"images[{i}]", value) for i, value in enumerate(listed)]
    refs = []
    for name, value in named:
        try:
            refs.append(image_ref(value, base))
        except ImageError as exc:
            raise ImageError(f"{name}: {exc}") from None
    return refs


def image_parts(parts: Iterable[Part], max_bytes: Optional[int] = None) -> list[ImagePart]:
    """The ImagePart of every Image part, in order (blocking: reads files — call it in an executor)."""
    built: dict[tuple[ImageRef, Optional[str]], ImagePart] = {}
    out = []
    for part in parts:
        if isinstance(part, Image):
            key = (part.ref, part.detail)
            if key not in built:  # an image referenced twice is read once
                built[key] = image_url(part.ref, part.detail, max_bytes)
            out.append(built[key])
    return out


AudioBuilder = Callable[[Audio], dict]


def _content(parts: Iterable[Part], images: Iterator[ImagePart], audio: Optional[AudioBuilder]) -> list[dict]:
    content: list[dict] = []
    for part in parts:
        if isinstance(part, Text):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            image = next(images, None)
            if image is None:
                raise ValueError("fewer ImageParts than Image parts: build them with image_parts() from the same parts")
            body = {"url": image.url, **({"detail": image.detail} if image.detail else {})}
            content.append({"type": "image_url", "image_url": body})
        else:
            if audio is None:
                raise ValueError(f"an Audio part ({part.index}) needs an audio part builder")
            content.append(audio(part))
    return content


def to_openai_content(parts: Sequence[Part], images: Sequence[ImagePart], audio: Optional[AudioBuilder] = None) -> list[dict]:
    """The JSON content list of `parts`: images[i] fills the i-th Image part; `audio` builds each Audio part."""
    pending = iter(images)
    content = _content(parts, pending, audio)
    if next(pending, None) is not None:
        raise ValueError("more ImageParts than Image parts: build them with image_parts() from the same parts")
    return content


def to_openai_messages(conversation: Conversation, images: Sequence[ImagePart], audio: Optional[AudioBuilder] = None) -> list[dict]:
    """The JSON `messages` of a conversation; images fill its Image parts across turns, in order."""
    pending = iter(images)
    messages: list[dict] = [{"role": "system", "content": conversation.system}] if conversation.system else []
    for turn in conversation.turns:
        content = _content(turn.parts, pending, audio)
        if turn.role == "assistant":  # plain text: the form every server takes for past replies
            if any(c.get("type") != "text" for c in content):
                raise ValueError("assistant turns hold text only")
            messages.append({"role": "assistant", "content": "\n".join(c["text"] for c in content)})
        else:
            messages.append({"role": turn.role, "content": content})
    if next(pending, None) is not None:
        raise ValueError("more ImageParts than Image parts: build them with image_parts() from the same parts")
    return messages
