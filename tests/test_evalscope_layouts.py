"""EvalScope's multimodal layouts run as shipped, or with the one line the error prints: image paths written
relative to the working folder, `<image k>` in a message list with the image in column image_k, bare base64
image cells; audio and image paths resolve by one rule, and messages quote user data clipped."""

from __future__ import annotations

import base64
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows, model

IMAGES = Path(__file__).parent / "fixtures" / "images"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def ask(text: str, *parts: dict) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": text}, *parts]}]


def image_url(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def vqa_project(root: Path, rows: list[dict]) -> None:
    """EvalScope's custom_eval layout: custom_eval/multimodal/vqa/example.jsonl, images named from the project folder."""
    data = root / "custom_eval" / "multimodal" / "vqa"
    data.mkdir(parents=True)
    (data / "example.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "runspecs" / "vision").mkdir(parents=True)
    (root / "runspecs" / "vision" / "vqa.json").write_text(json.dumps({"vqa": {
        "hf_repo": "../../custom_eval/multimodal/vqa/example.jsonl", "format": "general_vqa", "language": "english"}}))


def write_config(root: Path, url: str) -> None:
    (root / "config.yaml").write_text(yaml.safe_dump({"models": [model(url)], "runspec_dirs": ["runspecs"], "output_dir": "runs",
                                                      "dataset_metric": [["vqa", "accuracy"]]}))


def sent_images(seen) -> list[bytes]:
    return [base64.b64decode(url.partition(",")[2]) for url in seen.images]


def test_evalscopes_example_with_image_paths_from_the_working_folder_runs_with_the_printed_line(tmp_path):
    images = tmp_path / "custom_eval" / "multimodal" / "images"
    images.mkdir(parents=True)
    shutil.copy(IMAGES / "three.png", images / "three.png")
    vqa_project(tmp_path, [{"id": "q1", "messages": ask("How many?", image_url("custom_eval/multimodal/images/three.png")), "answer": "three"}])
    with ScriptedEndpoint(lambda seen, n: "three") as ep:
        write_config(tmp_path, ep.url)
        first = cli("run", "--config", "config.yaml", "--run-id", "r", cwd=tmp_path)
        assert first.returncode == 3 and len(ep.requests) == 0, first.stderr
        folder = str(images.resolve())
        assert f"to read it, allow its folder: --allow-data-dir {folder} (or allowed_data_dirs: [{folder}] in the config)" in first.stdout
        line = next(line for line in first.stderr.splitlines() if "retry them with: " in line)
        second = subprocess.run(shlex.split(line.split("retry them with: ", 1)[1]), cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert second.returncode == 0, second.stderr
    assert sent_images(ep.requests[0]) == [(IMAGES / "three.png").read_bytes()]


def test_image_k_placeholders_in_a_message_list_send_the_image_k_column_where_they_stand(tmp_path):
    (tmp_path / "custom_eval" / "multimodal" / "vqa").mkdir(parents=True)
    for name in ("three.png", "grey.jpg"):
        shutil.copy(IMAGES / name, tmp_path / "custom_eval" / "multimodal" / "vqa" / name)
    vqa_project_rows = [
        {"id": "two", "messages": ask("Compare <image 1> with <image 2>: which is grey?"), "image_1": "three.png", "image_2": "grey.jpg", "answer": "B"},
        {"id": "none", "messages": ask("What is in <image 1>?"), "answer": "x"},
    ]
    data = tmp_path / "custom_eval" / "multimodal" / "vqa"
    (data / "example.jsonl").write_text("".join(json.dumps(r) + "\n" for r in vqa_project_rows))
    (tmp_path / "runspecs" / "vision").mkdir(parents=True)
    (tmp_path / "runspecs" / "vision" / "vqa.json").write_text(json.dumps({"vqa": {
        "hf_repo": "../../custom_eval/multimodal/vqa/example.jsonl", "format": "general_vqa", "language": "english"}}))
    with ScriptedEndpoint(lambda seen, n: "B") as ep:
        write_config(tmp_path, ep.url)
        out = cli("run", "--config", "config.yaml", "--run-id", "r", cwd=tmp_path)
    assert out.returncode == 3, out.stderr   # the row whose placeholder has no image fails; the other is scored
    assert len(ep.requests) == 1
    content = ep.requests[0].body["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "image_url", "text"]
    assert [p.get("text") for p in content if p["type"] == "text"] == ["Compare", "with", ": which is grey?"]
    assert sent_images(ep.requests[0]) == [(IMAGES / "three.png").read_bytes(), (IMAGES / "grey.jpg").read_bytes()]
    records = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "runs" / "r" / "records" / "vqa__m.jsonl").read_text().splitlines()}
    assert records["none"]["error"].startswith("data: messages: <image 1> refers to image 1, but the sample has 0")


def test_a_bare_base64_image_cell_is_read_as_the_image_and_a_broken_one_is_quoted_clipped(tmp_path):
    png = (IMAGES / "three.png").read_bytes()
    big = base64.b64encode(png).decode() + "A" * 100_000   # not an image: read as a path, and refused as one
    rows = [{"id": "ok", "question": "How many? <image 1>", "options": ["two", "three"], "answer": "B", "image_1": base64.b64encode(png).decode()},
            {"id": "broken", "question": "How many? <image 1>", "options": ["two", "three"], "answer": "B", "image_1": big}]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mcq.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "runspecs" / "vision").mkdir(parents=True)
    (tmp_path / "runspecs" / "vision" / "mcq.json").write_text(json.dumps({"mcq": {
        "hf_repo": "../../data/mcq.jsonl", "format": "general_vmcq", "language": "english", "id_column": "id"}}))
    with ScriptedEndpoint(lambda seen, n: "B") as ep:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({"models": [model(ep.url)], "runspec_dirs": ["runspecs"], "output_dir": "runs",
                                                              "dataset_metric": [["mcq", "accuracy"]]}))
        out = cli("run", "--config", "config.yaml", "--run-id", "r", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert len(ep.requests) == 1 and sent_images(ep.requests[0]) == [png]
    records = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "runs" / "r" / "records" / "mcq__m.jsonl").read_text().splitlines()}
    assert records["ok"]["error"] is None
    assert len(records["broken"]["error"]) < 1_000 and "characters)" in records["broken"]["error"], records["broken"]["error"][:300]
    assert max(len(line) for line in (out.stdout + out.stderr).splitlines()) < 2_000


def test_audio_and_image_paths_resolve_alike_from_the_data_folder_then_the_working_folder(tmp_path):
    from lalmeval.data.audio_cells import audio_refs
    from lalmeval.media.images import ImageRef, local_file

    data, work = tmp_path / "data", tmp_path / "work"
    (data / "clips").mkdir(parents=True)
    (work / "clips").mkdir(parents=True)
    clip = demo_rows(1)[0]["audio"]
    shutil.copy(DEMO / clip, data / "clips" / "in_data.flac")
    shutil.copy(DEMO / clip, work / "clips" / "in_work.flac")
    shutil.copy(IMAGES / "three.png", data / "clips" / "in_data.png")
    shutil.copy(IMAGES / "three.png", work / "clips" / "in_work.png")
    import os

    previous = os.getcwd()
    os.chdir(work)
    try:
        for name in ("in_data", "in_work", "nowhere"):
            audio = audio_refs(f"clips/{name}.flac", data)[0].source
            expected = (data if name != "in_work" else work) / "clips" / f"{name}.flac"
            assert audio == str(expected)
            if name != "nowhere":
                assert local_file(ImageRef(f"clips/{name}.png", data)) == expected.with_suffix(".png")
    finally:
        os.chdir(previous)
