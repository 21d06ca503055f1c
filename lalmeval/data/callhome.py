"""CallHome folders: `<root>/transcripts/*.cha` with their calls in `<root>/audio/` → dataset rows.

Two segmentations:

- `utterance`: one row per timed utterance, its audio the utterance's span of the call and its
  reference the cleaned words (see `lalmeval.data.chat`), for word error rate.
- `turns`: consecutive utterances of one speaker form a turn; windows hold consecutive whole
  turns spanning at most `window_s` seconds (a turn longer than that is a window of its own).
  The audio runs from the window's first start to its last end; the reference has one line per
  turn, `A: words` / `B: words`, for speaker-attributed transcription.

Utterances whose cleaned text is empty (only laughter, fillers, `xxx`, …) carry no reference
and are left out, as are utterances without a time bullet; `Call` counts both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import soundfile as sf

from lalmeval.data.chat import Transcript, Utterance, read_chat
from lalmeval.data.confine import DataFolders, Refused
from lalmeval.errors import UserError

# Preferred first when one call has several files; all are formats soundfile reads.
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".sph", ".aiff", ".aif", ".au", ".caf", ".w64", ".rf64")
SEGMENTS = ("utterance", "turns")
TRANSCRIPTS_URL = "https://talkbank.org/ca/access/CallHome/"
MEDIA_URL = "https://media.talkbank.org/ca/CallHome/<language>/0wav/"


@dataclass(frozen=True)
class Call:
    """One call: its transcript and audio file."""

    name: str
    transcript: Transcript
    audio: Path

    @property
    def utterances(self) -> list[Utterance]:
        """Timed utterances with a non-empty reference, in file order."""
        return [u for u in self.transcript.utterances if u.text]

    @property
    def untimed(self) -> int:
        return self.transcript.untimed

    @property
    def empty(self) -> int:
        """Timed utterances whose cleaned text is empty (left out)."""
        return len(self.transcript.utterances) - len(self.utterances)


class Turn(NamedTuple):
    """Consecutive utterances of one speaker."""

    speaker: str
    text: str
    start: float
    end: float


def _transcript_paths(root: Path) -> list[Path]:
    folder = root / "transcripts"
    where = f"put the .cha transcripts in {folder}/ and the call audio (.wav, same names) in {root / 'audio'}/"
    if not root.is_dir():
        raise UserError(f"{root}: CallHome folder not found: {where}")
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".cha") if folder.is_dir() else []
    if not paths:
        raise UserError(f"{folder}: no .cha transcripts: download them from {TRANSCRIPTS_URL} (Download Transcripts) and copy the .cha files here")
    return paths


def _audio_files(root: Path) -> dict[str, Path]:
    """Audio file per stem, the preferred suffix winning."""
    folder = root / "audio"
    found: dict[str, Path] = {}
    rank = {suffix: i for i, suffix in enumerate(AUDIO_SUFFIXES)}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        suffix = path.suffix.lower()
        if suffix in rank and (path.stem not in found or rank[suffix] < rank[found[path.stem].suffix.lower()]):
            found[path.stem] = path
    return found


def _check_audio(path: Path) -> None:
    try:
        info = sf.info(str(path))
    except Exception as exc:  # soundfile raises several types; its message is the reason
        raise UserError(f"{path}: not readable audio: {str(exc).strip().splitlines()[0]}") from None
    if info.frames <= 0 or info.samplerate <= 0:
        raise UserError(f"{path}: audio has no samples")


def find_calls(root: Path, allowed: Sequence[Path] = ()) -> list[Call]:
    """Every transcript of `root` with its audio; a missing file is a UserError saying where to put it.

    Files are read only inside `root` (or `allowed`), links resolved: a transcript linked elsewhere is
    an error; a call's audio linked elsewhere is not opened here, and its samples fail with the reason."""
    root = root.expanduser().resolve()
    folders = DataFolders.of([root, *allowed])
    transcripts = _transcript_paths(root)
    for path in transcripts:
        try:
            folders.check(str(path), "CallHome transcript")
        except Refused as exc:
            raise UserError(str(exc)) from None
    audio = _audio_files(root)
    missing = [p.name for p in transcripts if p.stem not in audio]
    if missing:
        listed = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        first = Path(missing[0]).stem
        raise UserError(
            f"{root / 'audio'}: no audio for {listed}: put {first}.wav (or .flac, .mp3: same name as the transcript) "
            f"in {root / 'audio'}/ (the calls are at {MEDIA_URL})"
        )
    calls = []
    for path in transcripts:
        if _readable(folders, audio[path.stem]):
            _check_audio(audio[path.stem])
        calls.append(Call(path.stem, read_chat(path), audio[path.stem]))
    return calls


def _readable(folders: DataFolders, path: Path) -> bool:
    try:
        folders.check(str(path), "audio file")
        return True
    except Refused:
        return False


def turns(utterances: list[Utterance]) -> list[Turn]:
    """Merge consecutive utterances of the same speaker into turns."""
    out: list[Turn] = []
    for u in utterances:
        if out and out[-1].speaker == u.speaker:
            last = out[-1]
            out[-1] = Turn(last.speaker, f"{last.text} {u.text}", min(last.start, u.start), max(last.end, u.end))
        else:
            out.append(Turn(u.speaker, u.text, u.start, u.end))
    return out


def windows(all_turns: list[Turn], window_s: float) -> list[list[Turn]]:
    """Consecutive whole turns spanning at most `window_s` seconds; a longer turn stands alone."""
    groups: list[list[Turn]] = []
    current: list[Turn] = []
    for turn in all_turns:
        if current:
            start = min(turn.start, *(t.start for t in current))
            end = max(turn.end, *(t.end for t in current))
            if end - start <= window_s:
                current.append(turn)
                continue
            groups.append(current)
        current = [turn]
    if current:
        groups.append(current)
    return groups


def _audio(call: Call, start: float, end: float) -> dict[str, Any]:
    return {"path": str(call.audio), "start": start, "end": end}


def utterance_rows(call: Call) -> Iterator[dict[str, Any]]:
    """One row per timed, non-empty utterance; ids number the call's timed utterances from 0."""
    for n, u in enumerate(call.transcript.utterances):
        if u.text:
            yield {"id": f"{call.name}_{n:04d}", "audio": _audio(call, u.start, u.end), "reference": u.text, "speaker": u.speaker, "call": call.name}


def turn_rows(call: Call, window_s: float) -> Iterator[dict[str, Any]]:
    """One row per window of whole turns, the reference one `SPEAKER: words` line per turn."""
    for n, group in enumerate(windows(turns(call.utterances), window_s)):
        start, end = min(t.start for t in group), max(t.end for t in group)
        reference = "\n".join(f"{t.speaker}: {t.text}" for t in group)
        yield {"id": f"{call.name}_w{n:03d}", "audio": _audio(call, start, end), "reference": reference, "call": call.name}


def read_callhome(root: Path, segment: str = "utterance", window_s: float = 30.0,
                  allowed: Sequence[Path] = ()) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """Column names and rows of a CallHome folder (transcripts are read and checked before returning)."""
    if segment not in SEGMENTS:
        raise UserError(f"{root}: unknown CallHome segment '{segment}' (expected one of: {', '.join(SEGMENTS)})")
    if not window_s > 0:
        raise UserError(f"{root}: CallHome window must be a positive number of seconds, got {window_s}")
    calls = find_calls(root, allowed)
    if segment == "utterance":
        return ["id", "audio", "reference", "speaker", "call"], (row for call in calls for row in utterance_rows(call))
    return ["id", "audio", "reference", "call"], (row for call in calls for row in turn_rows(call, window_s))
