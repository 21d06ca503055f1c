"""What a dataset may read: the local files its rows name stay inside the data's own folder (or the
config's allowed_data_dirs), links resolved; never /proc, /sys or /dev; images only when their bytes are."""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lalmeval.data.confine import DataFolders, Refused
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, REPO, demo_rows, model

IMAGES = Path(__file__).resolve().parent / "fixtures" / "images"
CALLHOME = Path(__file__).resolve().parent / "fixtures" / "callhome"
CANARY = "canary-9Xq2-never-sent"


def run_cli(ws, run_id="s"):
    env = {**os.environ, "LALM_CANARY": CANARY}
    return subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", run_id],
                          cwd=REPO, capture_output=True, text=True, timeout=180, env=env)


def sent_bytes(ep) -> bytes:
    """Everything the endpoint received: texts and the decoded bytes of every image."""
    out = b""
    for seen in ep.requests:
        out += json.dumps(seen.body).encode()
        out += b"".join(base64.b64decode(url.partition(",")[2]) for url in seen.images if url.startswith("data:"))
    return out


def image_questions(ws, images: dict[str, str]):
    """One text question per image cell (sample id = the key), data file in ws/data/."""
    rows = [{"id": key, "question": f"What is in picture {key}?", "image": cell, "reference": "a shape"} for key, cell in images.items()]
    ws.runspec("vision", "pictures", {"pics": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                               "textual_input_column": "question", "image_column": "image"}})


@pytest.mark.parametrize("allowed", [[], ["/"]])
def test_an_image_linked_to_proc_self_environ_is_never_read_nor_sent(ws, allowed):
    """x.ico → /proc/self/environ used to send the whole environment (keys included) as an icon; it is
    refused even when the config allows every folder."""
    (ws.root / "data").mkdir()
    shutil.copy(IMAGES / "three.png", ws.root / "data" / "fine.png")
    (ws.root / "data" / "x.ico").symlink_to("/proc/self/environ")
    image_questions(ws, {"ok": "fine.png", "env": "x.ico"})
    with ScriptedEndpoint(lambda seen, n: "a shape") as ep:
        ws.config([model(ep.url)], [["pics", "accuracy"]], output_dir=str(ws.root / "runs"), allowed_data_dirs=allowed)
        out = run_cli(ws)
        assert len(ep.requests) == 1 and CANARY.encode() not in sent_bytes(ep)
    assert out.returncode == 3, out.stderr
    records = {r["id"]: r for r in ws.records("pics", "m", "s")}
    assert records["ok"]["error"] is None
    assert re.fullmatch(rf"data: image file {re.escape(str(ws.root / 'data' / 'x.ico'))} \(a link to /proc/\d+/environ\) "
                        r"is a system file under /proc: never read", records["env"]["error"]), records["env"]["error"]


def audio_rows(ws, cells: dict[str, object]) -> list[dict]:
    rows = demo_rows(len(cells))
    return [{**row, "id": key, "audio": cell} for row, (key, cell) in zip(rows, cells.items())]


def test_audio_outside_the_data_folder_fails_its_sample_until_its_folder_is_allowed(ws):
    """Relative paths that climb out, absolute paths, links that point out and Kimi-style lists holding one
    of them: each such sample fails alone with a one-line reason; allowed_data_dirs lets them in."""
    inside = ws.copy_demo_audio(demo_rows(1))[0]["audio"]              # data/audio/<clip>.flac
    outside = ws.root / "elsewhere"
    outside.mkdir()
    shutil.copy(DEMO / demo_rows(2)[1]["audio"], outside / "b.flac")
    (ws.root / "data" / "audio" / "link.flac").symlink_to(outside / "b.flac")
    cells = {"in": inside, "climbs": "../elsewhere/b.flac", "absolute": str(outside / "b.flac"), "link": "audio/link.flac",
             "list": [inside, "../elsewhere/b.flac"]}
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(audio_rows(ws, cells)), "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "go") as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws)
        assert len(ep.requests) == 1
        assert out.returncode == 3, out.stderr
        errors = {r["id"]: r["error"] for r in ws.records("cmds", "m", "s")}
        data = os.path.realpath(ws.root / "data")
        assert errors["in"] is None
        for key, shown in (("climbs", ws.root / "data" / "../elsewhere/b.flac"), ("absolute", outside / "b.flac"),
                           ("link", ws.root / "data" / "audio" / "link.flac"), ("list", ws.root / "data" / "../elsewhere/b.flac")):
            assert errors[key].startswith(f"data: audio file {shown}"), errors[key]
            elsewhere = os.path.realpath(outside)
            assert errors[key].endswith(f"is outside the data's folder {data}: to read it, allow its folder: "
                                        f"--allow-data-dir {elsewhere} (or allowed_data_dirs: [{elsewhere}] in the config)"), errors[key]
        assert "(a link to " in errors["link"]

        ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"), allowed_data_dirs=["elsewhere"])
        again = run_cli(ws)  # a resume: the failed samples are requested again, now allowed
    assert again.returncode == 0, again.stderr
    assert all(r["error"] is None for r in ws.records("cmds", "m", "s")[-4:])


def test_an_image_part_of_a_message_list_outside_the_data_folder_fails_its_sample(ws):
    (ws.root / "data").mkdir()
    shutil.copy(IMAGES / "three.png", ws.root / "data" / "three.png")
    shutil.copy(IMAGES / "grey.jpg", ws.root / "grey.jpg")

    def messages(url):
        return [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": url}}]}]

    rows = [{"id": "in", "messages": messages("three.png"), "answer": "a shape"},
            {"id": "out", "messages": messages("../grey.jpg"), "answer": "a shape"},
            {"id": "file-url", "messages": messages((ws.root / "grey.jpg").as_uri()), "answer": "a shape"}]
    ws.runspec("vision", "vqa", {"vqa": {"hf_repo": ws.jsonl(rows), "format": "general_vqa", "modality": "text", "audio_column": None}})
    with ScriptedEndpoint(lambda seen, n: "a shape") as ep:
        ws.config([model(ep.url)], [["vqa", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws)
        assert len(ep.requests) == 1
    assert out.returncode == 3, out.stderr
    errors = {r["id"]: r["error"] for r in ws.records("vqa", "m", "s")}
    assert errors["in"] is None
    assert "outside the data's folder" in errors["out"] and "outside the data's folder" in errors["file-url"]


def link_out(path: Path, elsewhere: Path) -> Path:
    """Move a file to `elsewhere` and leave a symlink to it in its place; returns the link."""
    elsewhere.mkdir(exist_ok=True)
    shutil.move(path, elsewhere / path.name)
    path.symlink_to(elsewhere / path.name)
    return path


def test_a_callhome_call_whose_audio_links_out_of_its_folder_fails_its_samples(ws):
    folder = Path(shutil.copytree(CALLHOME, ws.root / "private" / "callhome" / "eng", ignore=shutil.ignore_patterns("*.py", "*.json")))
    call = link_out(sorted((folder / "audio").iterdir())[0], ws.root / "elsewhere")
    ws.runspec("callhome", "callhome", {"ch": {"hf_repo": str(folder), "format": "callhome", "language": "english", "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "hello") as ep:
        ws.config([model(ep.url)], [["ch", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws)
    assert out.returncode == 3, out.stderr
    records = ws.records("ch", "m", "s")
    refused = [r for r in records if r["error"]]
    assert refused and len(refused) < len(records)
    assert all(r["id"].startswith(call.stem) and "(a link to " in r["error"] and "outside the data's folder" in r["error"] for r in refused)


def test_a_callhome_transcript_that_links_out_of_its_folder_is_one_line_and_exit_2(ws):
    folder = Path(shutil.copytree(CALLHOME, ws.root / "private" / "callhome" / "eng", ignore=shutil.ignore_patterns("*.py", "*.json")))
    transcript = link_out(sorted((folder / "transcripts").iterdir())[0], ws.root / "elsewhere")
    ws.runspec("callhome", "callhome", {"ch": {"hf_repo": str(folder), "format": "callhome", "language": "english", "id_column": "id"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["ch", "word_error_rate"]], output_dir=str(ws.root / "runs"))
    out = subprocess.run([sys.executable, "-m", "lalmeval", "validate", "--config", str(ws.root / "config.yaml")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    moved = ws.root / "elsewhere" / transcript.name
    assert f"error: CallHome transcript {transcript} (a link to {moved}) is outside the data's folder {folder}" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_data_folder_reached_through_a_link_is_still_its_own(tmp_path):
    real = tmp_path / "real"
    (real / "audio").mkdir(parents=True)
    (real / "audio" / "a.wav").write_bytes(b"RIFF")
    (tmp_path / "alias").symlink_to(real)
    folders = DataFolders.of([tmp_path / "alias"])
    assert folders.check(str(tmp_path / "alias" / "audio" / "a.wav"), "audio file") == str(real / "audio" / "a.wav")
    with pytest.raises(Refused, match="outside the data's folder"):
        folders.check(str(tmp_path / "alias" / ".." / "real-sibling.wav"), "audio file")
    with pytest.raises(Refused, match="system file under /dev"):
        DataFolders.of([Path("/")]).check("/dev/zero", "audio file")
