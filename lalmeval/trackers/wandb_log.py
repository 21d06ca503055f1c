"""Weights & Biases in offline mode: one offline run per model under <run_dir>/wandb/ (`wandb sync` uploads it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lalmeval.trackers.base import TRACKERS, Tracker, environment
from lalmeval.trackers.content import ModelRun

PROJECT = "lalmeval"


def log(run_dir: Path, runs: list[ModelRun]) -> Path:
    """Each model's scores (history and summary) and a wandb.Table per dataset, written offline."""
    import wandb

    # Offline whatever WANDB_MODE says; no git, code, console or system metrics: the run directory is the record.
    settings = wandb.Settings(silent=True, console="off", disable_git=True, save_code=False, disable_code=True,
                              x_disable_stats=True, x_disable_meta=True, x_save_requirements=False)
    folder = (run_dir / "wandb").resolve()
    # Its staging, cache and logs go inside the run directory too: the offline runs keep what `wandb sync` uploads.
    places = {"WANDB_DATA_DIR": folder / ".data", "WANDB_CACHE_DIR": folder / ".cache", "WANDB_CONFIG_DIR": folder / ".config",
              "WANDB_ARTIFACT_DIR": folder / ".artifacts"}
    with environment({name: str(path) for name, path in places.items()}):
        for model in runs:
            _log_model(wandb, run_dir, model, settings)
    return folder


def _log_model(wandb: Any, run_dir: Path, model: ModelRun, settings: Any) -> None:
    """One model as one offline W&B run."""
    run = wandb.init(project=PROJECT, dir=str(run_dir), name=model.model, group=model.run_id, job_type="evaluation", mode="offline",
                     config={"lalmeval_run_id": model.run_id, "partial": model.partial, **model.config}, settings=settings,
                     reinit="create_new")
    try:
        tables = {f"samples/{dataset}": wandb.Table(columns=t.columns, data=t.rows, allow_mixed_types=True) for dataset, t in model.tables.items()}
        run.log({**model.scalars, **tables})
        run.summary.update(model.scalars)
    finally:
        run.finish()


TRACKERS.register("wandb")(Tracker("wandb", "wandb", log))
