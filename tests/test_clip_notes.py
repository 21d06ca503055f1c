"""Notes of where a sample's clips came from: copies named by the request's own digest, answered from memory once known."""

import hashlib

from lalmeval.media.audio import identity_digest, prepare
from lalmeval.results.clips import LATER, ClipKeeper, notes
from lalmeval.results.records import AudioRef, Sample
from tests.support.workspace import DEMO, demo_rows


def test_a_copy_is_named_by_the_digest_its_request_computed_without_hashing_the_clip_again(tmp_path):
    clip = (DEMO / demo_rows(1)[0]["audio"]).read_bytes()
    prepared = prepare(clip, span=(0.0, 0.5))
    digest = identity_digest(prepared.digest)
    assert digest == hashlib.sha1(clip).hexdigest()   # a span's identity starts with its whole source's digest
    keeper = ClipKeeper(tmp_path)
    # A digest given is taken as it is: a name the clip's bytes would not hash to shows nothing hashed them.
    assert notes(Sample("s", (AudioRef(clip),)), keeper, ["f" * 40]) == [{"copy": f"audio/{'f' * 40}.flac"}]
    assert (tmp_path / "audio" / f"{'f' * 40}.flac").read_bytes() == clip


def test_once_the_folder_is_known_kept_and_overflowing_clips_are_answered_without_the_disk(tmp_path):
    first, second, small = b"RIFF" + bytes(996), b"fLaC" + bytes(996), b"OggS" + bytes(296)
    keeper = ClipKeeper(tmp_path, limit=1500)
    assert keeper.keep(first, write=False) is LATER          # the folder was never read: that needs the disk
    kept = keeper.keep(first)
    assert kept == "audio/" + hashlib.sha1(first).hexdigest() + ".wav"
    (tmp_path / kept).unlink()                                # gone from the disk: the answer comes from memory
    assert keeper.keep(first, write=False) == kept
    assert keeper.keep(second, write=False) is None           # a second 1,000 bytes would pass 1,500
    assert keeper.keep(small, write=False) is LATER           # fits: keeping it means writing it
    assert keeper.keep(small) is not None


def test_a_later_session_finds_the_copies_an_earlier_one_kept(tmp_path):
    clip = b"RIFF" + bytes(996)
    kept = ClipKeeper(tmp_path, limit=1500).keep(clip)
    later = ClipKeeper(tmp_path, limit=1500)
    assert later.keep(clip) == kept                            # the copy there, not a new one
    assert later.keep(b"OggS" + bytes(600)) is None            # and what it holds counts towards the fill


def test_notes_that_need_the_disk_say_so_rather_than_touch_it(tmp_path):
    sample = Sample("s", (AudioRef("clips/a.wav"), AudioRef(b"RIFF" + bytes(96))))
    assert notes(sample, ClipKeeper(tmp_path), write=False) is LATER
    assert not (tmp_path / "audio").exists()
    assert notes(sample, ClipKeeper(tmp_path)) == [{"path": "clips/a.wav"}, {"copy": "audio/" + hashlib.sha1(b"RIFF" + bytes(96)).hexdigest() + ".wav"}]


def test_preparing_a_clip_file_resolves_its_path_once_for_decoding_and_digest(monkeypatch):
    import os

    from lalmeval.media.audio import audio_identity

    path = str(DEMO / demo_rows(1)[0]["audio"])
    resolved = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda p, *a, **k: resolved.append(p) or real(p, *a, **k))
    prepared = prepare(path)
    assert resolved == [path]   # each resolution stats every component of the path: once is enough
    assert prepared.digest == audio_identity(path) and len(prepared.pcm) > 0
