"""Build throwaway runspecs, datasets and configs in a temp folder, and run them in-process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Optional

import yaml

from lalmeval.catalog.runspecs import Catalog
from lalmeval.config.schema import load_config
from lalmeval.run.plan import Plan, build_plan
from lalmeval.run.runner import RunResult, run

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "private_datasets" / "demo_commands"


def demo_rows(count: Optional[int] = None) -> list[dict[str, Any]]:
    """Rows of the shipped real-speech dataset (audio paths are relative to DEMO)."""
    rows = [json.loads(line) for line in (DEMO / "demo_commands.jsonl").read_text().splitlines()]
    return rows[:count] if count else rows


class Workspace:
    """A temp folder holding runspecs/<category>/<task>.json, data files and config.yaml."""

    def __init__(self, root: Path):
        self.root = root
        (root / "runspecs").mkdir(parents=True, exist_ok=True)

    def copy_demo_audio(self, rows: list[dict[str, Any]], folder: str = "data") -> list[dict[str, Any]]:
        """Copy the clips of `rows` into the workspace; returns rows with workspace-relative audio."""
        target = self.root / folder / "audio"
        target.mkdir(parents=True, exist_ok=True)
        out = []
        for row in rows:
            shutil.copy(DEMO / row["audio"], target / Path(row["audio"]).name)
            out.append({**row, "audio": f"audio/{Path(row['audio']).name}"})
        return out

    def jsonl(self, rows: list[dict[str, Any]], name: str = "data/set.jsonl") -> str:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return name

    def text_questions(self, count: int, name: str = "qs") -> None:
        """Dataset `name` (runspec qa/questions), text only: row i (id q<i>) asks 'question i' and expects
        'answer i' (the reply of tests.support.endpoint.answer_by_number)."""
        rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(count)]
        self.runspec("qa", "questions", {name: {"hf_repo": self.jsonl(rows), "id_column": "id", "modality": "text",
                                                "textual_input_column": "question", "audio_column": None}})

    def runspec(self, category: str, task: str, datasets: dict[str, dict[str, Any]]) -> Path:
        """Write runspecs/<category>/<task>.json; hf_repo paths are given relative to the workspace."""
        path = self.root / "runspecs" / category / f"{task}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        fixed = {}
        for name, spec in datasets.items():
            spec = {"language": "english", "split": "test", **spec}
            if not spec["hf_repo"].startswith(("/", "hub:")):
                spec["hf_repo"] = str(Path("../..") / spec["hf_repo"])
            spec["hf_repo"] = spec["hf_repo"].removeprefix("hub:")
            fixed[name] = spec
        path.write_text(json.dumps(fixed, indent=1))
        return path

    def config(self, models: list[dict[str, Any]], dataset_metric: list[list[str]], **extra: Any) -> Path:
        data = {"dataset_metric": dataset_metric, "models": [{"info": m} for m in models], "runspec_dirs": ["runspecs"], "output_dir": "runs", **extra}
        path = self.root / "config.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def plan(self) -> Plan:
        path = self.root / "config.yaml"
        return build_plan(load_config(path), path)

    def run(self, run_id: str = "t", fresh: bool = True) -> RunResult:
        """Run the config; `fresh` removes an earlier run of the same id instead of resuming it."""
        if fresh:
            shutil.rmtree(self.root / "runs" / run_id, ignore_errors=True)
        return run(self.plan(), self.root / "runs", run_id, quiet=True)

    def records(self, dataset: str, model: str, run_id: str = "t") -> list[dict[str, Any]]:
        path = self.root / "runs" / run_id / "records" / f"{dataset}__{model}.jsonl"
        # Lines end at "\n" only: a record's text may hold U+2028 and the like, which splitlines() would cut at.
        return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def model(url: str, name: str = "m", **settings: Any) -> dict[str, Any]:
    """A model entry pointing at a scripted endpoint, with fast retries. Its model id is `scripted-<name>`:
    entries sharing a model id would be replicas of one model."""
    return {"name": name, "url": url, "model": f"scripted-{name}", "batch_size": 4, "timeout": 10, **settings}


def runspec_dataset(tmp_path: Path, **fields: Any):
    """The catalog entry of one runspec dataset with these fields (hf_repo x.jsonl unless given), as a metric gets it."""
    folder = tmp_path / "runspecs" / "t"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.json").write_text(json.dumps({"d": {"hf_repo": "x.jsonl", **fields}}))
    return Catalog.load([tmp_path / "runspecs"]).datasets["d"]
