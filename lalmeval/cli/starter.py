"""`lalmeval init`: a commented starter config, a runspec and a tiny example dataset to edit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lalmeval.catalog import bundled
from lalmeval.errors import UserError

DEMO = bundled.DEMO_COMMANDS
EXAMPLE_CLIPS = 3
RUNSPEC = Path("runspecs") / "my_category" / "my_task.json"
DATA = Path("data") / "my_dataset.jsonl"

CONFIG = """\
# A starter config: one model, one dataset (my_dataset, declared in runspecs/my_category/my_task.json
# with three example clips in data/). Check it with `lalmeval validate --config config.yaml`.
# Every key, with what it does: sample_config.yaml in the lalmeval repository, and its docs/configuration.md.
# ${VAR} reads an environment variable (unset is an error); ${VAR:-default} has a fallback.

# [dataset, metric] pairs. A name is a dataset, a task type (a runspec file's stem) or a category
# (a runspec folder); `lalmeval list --config config.yaml` shows them all. Metric "all" means the
# metrics the dataset's runspec lists.
dataset_metric:
  - ["my_dataset", "word_error_rate"]

# Folders of your own runspecs, relative to this file (lalmeval's built-in runspecs/ are always read).
runspec_dirs: ["runspecs"]

filters:
  num_samples: null          # at most N samples per dataset (null: all); handy for a first try

models:
  - info:
      name: "my-model"                    # names the results and files; another name is another model (same name: replicas)
      inference_type: "openai"            # openai | vllm: POST {url}/chat/completions; transcription: POST {url}/audio/transcriptions
      url: "http://127.0.0.1:8000/v1"     # base URL of your OpenAI-compatible server (vllm serve listens on :8000)
      model: "my-model-id"                # model id sent with each request (GET {url}/models lists them)
      batch_size: 8                       # requests in flight to this endpoint
      # auth_token: ${MY_API_KEY}         # Bearer token from the environment; never written to any file
      # verify_ssl: false                 # accept a self-signed certificate (internal https endpoint)
      # launch: "vllm serve Qwen/Qwen2-Audio-7B-Instruct --port 8000"   # start the server for the run, stop it after

output_dir: "run_logs"       # each run writes run_logs/<run_id>/ (relative to where you run lalmeval)
"""

SPEC = {
    "my_dataset": {
        "hf_repo": "../../data/my_dataset.jsonl",
        "split": "test",
        "language": "english",
        "modality": "audio",
        "audio_column": "audio",
        "target_column": "reference",
        "id_column": "id",
        "metrics": ["word_error_rate"],
        "instruction": "Transcribe the audio.",
    }
}


def _example_rows(target: Path) -> list[dict[str, str]]:
    """A few bundled speech clips copied beside the data file, as rows pointing at them."""
    rows = []
    source = DEMO / "demo_commands.jsonl"
    if not source.is_file():
        return rows  # an installation without the bundled data: the runspec is still a valid start
    for line in source.read_text(encoding="utf-8").splitlines()[:EXAMPLE_CLIPS]:
        row = json.loads(line)
        clip = Path(row["audio"]).name
        (target / "audio").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DEMO / row["audio"], target / "audio" / clip)
        rows.append({"id": row["id"], "audio": f"audio/{clip}", "reference": row["reference"]})
    return rows


def write_starter(folder: Path, force: bool = False) -> list[Path]:
    """Write config.yaml, a runspec and example data under `folder`; existing files need `force`."""
    targets = [folder / "config.yaml", folder / RUNSPEC, folder / DATA]
    existing = [p for p in targets if p.exists()]
    if existing and not force:
        raise UserError(f"{existing[0]} already exists: lalmeval init leaves it alone (pass --force to overwrite, or pick another folder)")
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: is a file, expected a folder")
    try:
        for path in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
        targets[0].write_text(CONFIG, encoding="utf-8")
        targets[1].write_text(json.dumps(SPEC, indent=2) + "\n", encoding="utf-8")
        rows = _example_rows(targets[2].parent)
        targets[2].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{folder}: cannot write the starter files: {exc.strerror or exc}") from None
    return targets


def write_demo(folder: Path, force: bool = False) -> Path:
    """Write the demo's config.yaml (the one `bash evaluate.sh` runs in a checkout) into `folder`."""
    target = folder / "config.yaml"
    if target.exists() and not force:
        raise UserError(f"{target} already exists: lalmeval init leaves it alone (pass --force to overwrite, or pick another folder)")
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: is a file, expected a folder")
    if not bundled.DEMO_CONFIG.is_file():
        raise UserError(f"{bundled.DEMO_CONFIG}: the demo config is missing from this installation of lalmeval")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundled.DEMO_CONFIG, target)
    except OSError as exc:
        raise UserError(f"{folder}: cannot write the demo config: {exc.strerror or exc}") from None
    return target
