"""MLflow: a file store in <run_dir>/mlruns/ (tracking URI `file:<run_dir>/mlruns`), one MLflow run per model."""

from __future__ import annotations

import re
import time
from pathlib import Path

from lalmeval.trackers.base import TRACKERS, Tracker, environment
from lalmeval.trackers.content import ModelRun
from lalmeval.results.store import safe_name

EXPERIMENT = "lalmeval"
_NOT_IN_KEYS = re.compile(r"[^A-Za-z0-9_\-. /:]")   # MLflow's metric and parameter names allow these only
PARAM_LIMIT = 6000   # characters of a parameter value MLflow takes


def key(name: str) -> str:
    """A metric or parameter name MLflow accepts: other characters (an '@' in a peer's dataset name) become '_'."""
    return _NOT_IN_KEYS.sub("_", name)


def _params(model: ModelRun) -> dict[str, str]:
    """The run's settings as MLflow parameters: the top-level config keys, each as its text."""
    import yaml

    found = {"lalmeval_run_id": model.run_id, "partial": str(model.partial)}
    for name, value in model.config.items():
        text = value if isinstance(value, str) else yaml.safe_dump(value, sort_keys=False, allow_unicode=True).strip()
        found[key(f"config.{name}")] = text[:PARAM_LIMIT]
    return found


def log(run_dir: Path, runs: list[ModelRun]) -> Path:
    """Each model's scores as metrics, the config as parameters, a table per dataset and the run's files as artifacts."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    store = run_dir.resolve() / "mlruns"
    # MLflow 3 refuses its file store unless asked: a store inside the run directory is what --log mlflow means.
    with environment({"MLFLOW_ALLOW_FILE_STORE": "true"}):
        client = MlflowClient(tracking_uri=store.as_uri())
        found = client.get_experiment_by_name(EXPERIMENT)
        experiment = found.experiment_id if found else client.create_experiment(EXPERIMENT)
        now = int(time.time() * 1000)
        for model in runs:
            run = client.create_run(experiment, run_name=model.model, tags={"lalmeval.run_id": model.run_id, "lalmeval.model": model.model})
            run_id = run.info.run_id
            metrics = [Metric(key(k), v, now, 0) for k, v in model.scalars.items()]
            params = [Param(k, v) for k, v in _params(model).items()]
            for start in range(0, max(len(metrics), len(params)), 100):   # MLflow takes at most 100 parameters per batch
                client.log_batch(run_id, metrics=metrics[start:start + 100], params=params[start:start + 100])
            client.set_tag(run_id, "partial", str(model.partial))
            for dataset, table in model.tables.items():
                columns = {name: [row[i] for row in table.rows] for i, name in enumerate(table.columns)}
                client.log_table(run_id, columns, artifact_file=f"samples/{safe_name(dataset)}.json")
            for name in ("final_scores.json", "config.yaml", "report.html", "results.csv"):
                if (run_dir / name).is_file():
                    client.log_artifact(run_id, str(run_dir / name))
            client.set_terminated(run_id)
    return store


TRACKERS.register("mlflow")(Tracker("mlflow", "mlflow", log))
