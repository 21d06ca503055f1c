"""What a dataset may read: the local files its rows name stay inside the data's own folder.

A row names files (audio paths, image paths, Kimi's audio_path lists, image parts of a message
list), and their bytes are sent to an endpoint. Without a rule, one row could send any file the
run can read — `x.ico` linked to `/proc/self/environ` sent the whole environment, keys included.

The rule: a file is read only when its real path (every symlink resolved) lies inside one of the
dataset's folders — the folder of its data file (a data folder, a CallHome folder: that folder),
the folder its relative paths start from, the Hugging Face caches for hub datasets — or a folder
listed in the config's `allowed_data_dirs`. Never anything under /proc, /sys or /dev, whatever is
allowed. Readers then take only regular files, and images only when their bytes are an image.
A row that names a file outside fails alone, with a one-line reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from lalmeval.media.images import ImageError, ImageRef, local_file
from lalmeval.files import system_tree
from lalmeval.results.records import AudioRef, Sample
from lalmeval.text import clipped

ALLOW_KEY = "allowed_data_dirs"
ALLOW_FLAG = "--allow-data-dir"


class Refused(ValueError):
    """A file a row names that the dataset may not read; the message is the sample's reason."""


def allow_line(folder: str) -> str:
    """The one line that lets a dataset read under `folder`: the flag, or the config key."""
    return f"{ALLOW_FLAG} {folder} (or {ALLOW_KEY}: [{folder}] in the config)"


def folders_to_allow(files: Iterable[str]) -> list[str]:
    """The folders to allow so that every one of `files` (real paths) is read: their common folder, or
    when they share only the root, each one's top two levels (never the whole disk)."""
    files = sorted(set(files))
    if not files:
        return []
    common = os.path.commonpath([os.path.dirname(f) for f in files])
    if common != os.sep:
        return [common]
    return sorted({os.sep.join(f.split(os.sep)[:3]) if f.count(os.sep) > 2 else os.path.dirname(f) for f in files})


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class DataFolders:
    """The folders (real paths) a dataset's rows may name files in; the first is the data's own."""

    roots: tuple[str, ...]
    outside: set[str] = field(default_factory=set, compare=False)   # refused files that an allowed folder would let in

    @classmethod
    def of(cls, folders: Iterable[Path]) -> "DataFolders":
        """The given folders with their symlinks resolved, duplicates dropped, in order."""
        return cls(tuple(dict.fromkeys(os.path.realpath(os.path.expanduser(str(f))) for f in folders)))

    def check(self, path: str, what: str) -> str:
        """The real path of the file `path` names when the dataset may read it; Refused saying why not."""
        real = os.path.realpath(path)
        shown = clipped(path) if real == os.path.abspath(path) else f"{clipped(path)} (a link to {clipped(real)})"
        tree = system_tree(real)
        if tree is not None:
            raise Refused(f"{what} {shown} is a system file under {tree}: never read")
        if not any(_inside(real, root) for root in self.roots):
            self.outside.add(real)   # a set's add is atomic: readers of one source may share it
            raise Refused(f"{what} {shown} is outside the data's folder {self.roots[0] if self.roots else '(none)'}: "
                          f"to read it, allow its folder: {allow_line(os.path.dirname(real))}")
        return real

    def sample(self, sample: Sample) -> Sample:
        """`sample` with every local file it names checked and replaced by its real path; a refused file
        becomes the sample's problem (it fails alone, with the reason)."""
        if sample.problem is not None:
            return sample
        try:
            audio = tuple(self._audio(ref) for ref in sample.audio)
            images = tuple(self._image(ref) for ref in sample.images)
            conversation = self._conversation(sample.conversation)
        except Refused as exc:
            return replace(sample, problem=f"data: {exc}")
        return replace(sample, audio=audio, images=images, conversation=conversation)

    def _audio(self, ref: AudioRef) -> AudioRef:
        if not isinstance(ref.source, str):
            return ref
        return AudioRef(self.check(ref.source, "audio file"), ref.span)

    def _image(self, ref: Any) -> Any:
        if not isinstance(ref, ImageRef):
            return ref
        try:
            path = local_file(ref)
        except ImageError:
            return ref  # not found, or a scheme we do not read: the reader says so for the sample
        return ref if path is None else ImageRef(self.check(str(path), "image file"), ref.base)

    def _conversation(self, conversation: Optional[Any]) -> Optional[Any]:
        from lalmeval.data.messages import Image, Turn  # the messages module imports images: kept out of import time

        if conversation is None:
            return None
        turns = []
        for turn in conversation.turns:
            parts = tuple(Image(self._image(p.ref), p.detail) if isinstance(p, Image) else p for p in turn.parts)
            turns.append(Turn(turn.role, parts))
        return replace(conversation, turns=tuple(turns))


def hub_caches() -> list[Path]:
    """Where the `datasets` library keeps what it downloaded and extracted: hub rows may name files there."""
    try:
        from datasets import config as datasets_config
        from huggingface_hub import constants
    except ImportError:
        return []
    return [Path(datasets_config.HF_DATASETS_CACHE), Path(constants.HF_HUB_CACHE)]


def allowed_dirs(listed: Sequence[str], base: Path) -> list[Path]:
    """The config's `allowed_data_dirs`, relative to the config file's folder."""
    return [(base / Path(folder).expanduser()) for folder in listed]
