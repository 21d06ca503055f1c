"""TensorBoard: event files in <run_dir>/tensorboard/<model>/ (`tensorboard --logdir <run_dir>/tensorboard`), one run per model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from lalmeval.results.store import safe_name
from lalmeval.trackers.base import TRACKERS, Tracker
from lalmeval.trackers.content import ModelRun, Table

CELL = 1000   # characters of a text kept per cell of a markdown table (the run directory has them whole)


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    text = text[:CELL] + ("…" if len(text) > CELL else "")
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def markdown(table: Table) -> str:
    """A per-sample table as the markdown TensorBoard's text dashboard renders."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines)


def log(run_dir: Path, runs: list[ModelRun]) -> Path:
    """Each model's scores as scalars (step 0) and each dataset's samples as a text table; an earlier log of the run is replaced."""
    from tensorboardX import SummaryWriter

    root = run_dir / "tensorboard"
    for model in runs:
        folder = root / safe_name(model.model)
        for old in folder.glob("events.out.tfevents.*"):  # a resumed run logs its complete scores instead of adding a second set
            old.unlink()
        writer = SummaryWriter(logdir=str(folder))
        try:
            for name, value in model.scalars.items():
                writer.add_scalar(name, value, 0)
            for dataset, table in model.tables.items():
                writer.add_text(f"samples/{dataset}", markdown(table), 0)
            config = yaml.safe_dump({"lalmeval_run_id": model.run_id, "partial": model.partial, **model.config}, sort_keys=False, allow_unicode=True)
            writer.add_text("config", "    " + config.replace("\n", "\n    "), 0)   # indented: shown as code
        finally:
            writer.close()
    return root


TRACKERS.register("tensorboard")(Tracker("tensorboardX", "tensorboard", log))
