"""What the flags of `lalmeval run` change in a config: --limit, --models, --datasets (--tasks), --metrics,
a dataset declared with --hf-dataset and a model given with --model-url.

The flags rewrite the config before the plan is built, so everything downstream — the plan, the
stored config.yaml, the check that a resume continues the same evaluation — sees one config that
says exactly what was run:

- `--limit N` is `filters.num_samples: N` (the first N samples of every dataset; N drawn at random
  with `filters.shuffle`).
- `--models a,b` keeps the model entries with these names (every replica of each); overrides and
  prompt rules naming the others go with them. An unknown name is an error naming the closest.
- `--datasets x,y` runs these datasets (task types, categories, groups) instead of the config's
  list, as lm-eval's `--tasks` does: each keeps the metrics the config pairs with it or with a task
  type, category or group holding it, and a name the config does not pair runs its runspec's metrics.
- `--metrics m[,n]` replaces the metric of every pair.
- `--hf-dataset` declares one dataset (the config's `datasets` key) and runs only it, with `--metric`.
- `--model-url URL --model ID` replaces the config's models with that one (no config file needed).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from lalmeval.catalog.declared import HF_FLAG, HubDataset, model_entry, note_language
from lalmeval.data.confine import ALLOW_FLAG, ALLOW_KEY
from lalmeval.errors import UserError, closest

if TYPE_CHECKING:   # the parser is built from this module on every command: the schema is imported when a config is read
    from lalmeval.config.schema import Config

COMMAND_LINE = "command line"   # how messages name a config made from flags alone
DEFAULT_CONFIG = "config.yaml"
_CROSS_REFERENCES = ("temperature_overrides", "generation_overrides", "prompt_rules")


@dataclass(frozen=True)
class Overrides:
    """The config-changing flags of one command line."""

    limit: Optional[int] = None
    models: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    hub: Optional[HubDataset] = None
    model_url: Optional[str] = None
    model: Optional[str] = None
    model_name: Optional[str] = None
    allowed: tuple[str, ...] = ()   # --allow-data-dir: absolute folders rows may also name files in

    def supplied(self) -> dict[str, Any]:
        """The required keys these flags supply, so a config may leave them out (a file of models only, with --hf-dataset)."""
        found: dict[str, Any] = {}
        if self.model_url is not None:   # stand-ins the flags' own values replace (and check, naming the flag)
            found["models"] = [{"name": "-", "url": "http://127.0.0.1:9/v1", "model": "-"}]
        if self.hub is not None or self.datasets:
            found["dataset_metric"] = [[name, "all"] for name in self.datasets or (self.hub.dataset_name,)]
        return found

    def words(self) -> str:
        """These flags as a command line takes them again (for printed resume and retry commands)."""
        pairs: list[tuple[str, Optional[str]]] = [("--limit", str(self.limit) if self.limit else None),
                                                  ("--models", ",".join(self.models) or None), ("--datasets", ",".join(self.datasets) or None),
                                                  ("--metrics", ",".join(self.metrics) or None)]
        if self.hub is not None:
            hub = self.hub
            pairs += [(HF_FLAG, hub.repo), ("--subset", hub.subset), ("--split", hub.split), ("--audio-column", hub.audio_column),
                      ("--target-column", hub.target_column), ("--id-column", hub.id_column), ("--text-column", hub.text_column),
                      ("--instruction", hub.instruction), ("--language", hub.language), ("--dataset-name", hub.name),
                      ("--modality", hub.modality)]
        pairs += [("--model-url", self.model_url), ("--model", self.model), ("--model-name", self.model_name)]
        pairs += [(ALLOW_FLAG, folder) for folder in self.allowed]
        return "".join(f" {flag} {shlex.quote(value)}" for flag, value in pairs if value is not None)


def _names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of samples, got {value!r}") from None
    if not 0 < number <= 10**9:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000000000 samples, got {number}")
    return number


def add_selection(parser: argparse.ArgumentParser, choose: bool = True) -> None:
    """--limit and --metrics / --metric; with `choose`, --models and --datasets / --tasks."""
    parser.add_argument("--limit", type=_limit, metavar="N", help="at most N samples per dataset (filters.num_samples)")
    if choose:
        parser.add_argument("--models", action="append", metavar="NAMES", help="evaluate only these model entries of the config, by name (comma-separated)")
        parser.add_argument("--datasets", "--tasks", dest="datasets", action="append", metavar="NAMES",
                            help="run these datasets, task types, categories or groups instead of the config's dataset_metric (comma-separated); "
                                 "each keeps the metrics the config gives it, else its runspec's")
    parser.add_argument("--metrics", "--metric", dest="metrics", action="append", metavar="NAMES",
                        help="score every dataset with these metrics (comma-separated) instead of the config's")
    add_allowed(parser)


def add_allowed(parser: argparse.ArgumentParser) -> None:
    """--allow-data-dir DIR (repeatable): the config's allowed_data_dirs, from the command line."""
    parser.add_argument(ALLOW_FLAG, dest="allow_data_dir", action="append", metavar="DIR",
                        help="a folder outside the data's own in which its rows may name audio and image files "
                             f"(the config's {ALLOW_KEY}; repeat for several)")


def add_declared(parser: argparse.ArgumentParser, models: bool = True) -> None:
    """--hf-dataset and its columns; with `models`, --model-url / --model / --model-name."""
    hub = parser.add_argument_group("a dataset without a runspec")
    hub.add_argument(HF_FLAG, metavar="REPO", help="evaluate this hub dataset (or local data file or folder) with --metric, no runspec needed")
    hub.add_argument("--subset", help="hub configuration of --hf-dataset")
    hub.add_argument("--split", help="split of --hf-dataset (default: test)")
    hub.add_argument("--audio-column", help="column holding the audio (default: audio)")
    hub.add_argument("--target-column", help="column holding the reference (default: reference)")
    hub.add_argument("--id-column", help="column holding sample ids (default: the row number)")
    hub.add_argument("--text-column", help="column holding text input, sent with the audio (--modality text: instead of it)")
    hub.add_argument("--modality", choices=("audio", "text", "audio_text"), help="what is sent: the audio (default), the text column, or both")
    hub.add_argument("--instruction", help="the instruction sent with every sample")
    hub.add_argument("--language", help="language of --hf-dataset (ISO code or name; default: english)")
    hub.add_argument("--dataset-name", help="name of --hf-dataset in reports and files (default: from the repo, subset and split)")
    if models:
        model = parser.add_argument_group("a model without a config")
        model.add_argument("--model-url", metavar="URL", help="evaluate the model at this OpenAI-compatible base URL (replaces the config's models)")
        model.add_argument("--model", metavar="ID", help="with --model-url: the model id sent in each request")
        model.add_argument("--model-name", metavar="NAME", help="with --model-url: its name in reports and files (default: the model id)")


def from_args(args: argparse.Namespace) -> Overrides:
    """The overrides a parsed command line asks for; flags that cannot go together are one error line."""
    listed = {key: tuple(dict.fromkeys(n for value in getattr(args, key, None) or [] for n in _names(value))) for key in ("models", "datasets", "metrics")}
    for key, names in listed.items():   # an empty list would otherwise mean "all" and run everything
        given = getattr(args, key, None)
        if given and not names:
            raise UserError(f"--{key} {shlex.quote(','.join(given))} names no {key[:-1]}: give at least one name (or leave the flag out for the config's)")
    hub = None
    if getattr(args, "hf_dataset", None):
        hub = HubDataset(args.hf_dataset, args.subset, args.split, args.audio_column, args.target_column, args.id_column,
                         args.text_column, args.instruction, args.language, args.dataset_name, args.modality)
        if listed["datasets"]:
            raise UserError(f"{HF_FLAG} declares the dataset to run; --datasets chooses among declared ones: give one of them")
    else:
        given = [f"--{k.replace('_', '-')}" for k in ("subset", "split", "audio_column", "target_column", "id_column", "text_column",
                                                       "instruction", "language", "dataset_name", "modality") if getattr(args, k, None) is not None]
        if given:
            raise UserError(f"{given[0]} describes the dataset of {HF_FLAG}, which is not given")
    url, model, name = getattr(args, "model_url", None), getattr(args, "model", None), getattr(args, "model_name", None)
    if url is None and (model or name):
        raise UserError(f"{'--model' if model else '--model-name'} goes with --model-url (the model's base URL)")
    if url is not None and listed["models"]:
        raise UserError("--model-url gives the one model to evaluate; --models chooses among a config's: give one of them")
    return Overrides(getattr(args, "limit", None), listed["models"], listed["datasets"], listed["metrics"], hub, url, model, name,
                     given_allowed(getattr(args, "allow_data_dir", None) or []))


def given_allowed(folders: list[str]) -> tuple[str, ...]:
    """--allow-data-dir folders, absolute (the stored config is read from anywhere); one that is no folder is refused."""
    found = []
    for folder in folders:
        path = Path(folder).expanduser()
        if not folder.strip() or not path.is_dir():
            raise UserError(f"{ALLOW_FLAG} {folder!r}: no such folder")
        found.append(str(path.resolve()))
    return tuple(dict.fromkeys(found))


def config_file(given: Optional[str], overrides: Overrides) -> Optional[str]:
    """The config file a run reads: --config, else config.yaml — or none when --model-url gives the model."""
    return given if given is not None or overrides.model_url is not None else DEFAULT_CONFIG


def load_plan(config_path: Optional[str], overrides: Overrides):
    """The plan of a run: the config file (None: the flags alone) with the command line's overrides applied."""
    from lalmeval.config.schema import load_config
    from lalmeval.run.plan import build_plan

    config = load_config(config_path, overrides.supplied()) if config_path is not None else None
    path = Path(config_path) if config_path is not None else Path(COMMAND_LINE)
    changed = apply(config, overrides, path)
    note = note_language(overrides.hub)
    if note:
        print(note, file=sys.stderr)
    return build_plan(changed, path)


def apply(config: Optional[Config], overrides: Overrides, path: Path) -> Config:
    """The config with the overrides applied (None: a config made of the flags alone); errors name the flag."""
    from lalmeval.metrics import METRICS

    data: dict[str, Any] = config.model_dump(exclude_unset=True) if config is not None else {}
    for metric in overrides.metrics:
        if metric != "all":
            METRICS.get(metric, where="--metrics")
    pairs_changed = False
    if overrides.model_url is not None:
        data["models"] = [model_entry(overrides.model_url, overrides.model, overrides.model_name)]
    if overrides.models:
        _select_models(data, overrides.models, str(path))
    if overrides.hub is not None:
        name, metrics = overrides.hub.dataset_name, list(overrides.metrics)
        data["datasets"] = {**data.get("datasets", {}), name: overrides.hub.check(metrics)}
        data["dataset_metric"], pairs_changed = [[name, m] for m in metrics], True
    elif overrides.datasets:
        data["dataset_metric"], pairs_changed = _chosen_pairs(data, overrides.datasets, path), True
    if overrides.metrics and overrides.hub is None:
        data["dataset_metric"] = _unique([[name, m] for name, _ in data.get("dataset_metric", []) for m in overrides.metrics])
        pairs_changed = True
    if overrides.allowed:
        data[ALLOW_KEY] = list(dict.fromkeys([*data.get(ALLOW_KEY, []), *overrides.allowed]))
    if overrides.limit is not None:
        data["filters"] = {**data.get("filters", {}), "num_samples": overrides.limit}
    if pairs_changed and data.get("aggregate"):
        data["aggregate"] = _aggregates_kept(data, path)
    return _validated(data, str(path))


def _validated(data: dict[str, Any], source: str) -> Config:
    from pydantic import ValidationError

    from lalmeval.config.schema import Config

    if not data.get("models"):
        raise UserError(f"{source}: no model to evaluate: give --config with models, or --model-url URL --model ID")
    if not data.get("dataset_metric"):
        raise UserError(f"{source}: nothing to evaluate: give --config with dataset_metric, --datasets, or {HF_FLAG} with --metric")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UserError(f"{source}: {where or 'config'}: {err['msg'].removeprefix('Value error, ')}") from None


def _unique(pairs: list[list[str]]) -> list[list[str]]:
    return [list(p) for p in dict.fromkeys(tuple(p) for p in pairs)]


def _select_models(data: dict[str, Any], names: tuple[str, ...], source: str) -> None:
    """Keep the model entries named (every replica), and the overrides and rules that can still apply."""
    known = list(dict.fromkeys(m["name"] for m in data.get("models", [])))
    for name in names:
        if name not in known:
            raise UserError(f"--models: unknown model '{name}'{closest(name, known)}; {source} has: {', '.join(known) or 'none'}")
    data["models"] = [m for m in data["models"] if m["name"] in names]
    for key in _CROSS_REFERENCES:  # an entry naming a model left out would apply to nothing (and be refused as unknown)
        if key in data:
            data[key] = [e for e in data[key] if e.get("model") is None or e["model"] in names]


def _catalog(data: dict[str, Any], path: Path):
    """The runspecs a config reaches (built-in, its runspec_dirs and its own datasets), for resolving names."""
    from lalmeval.catalog.runspecs import Catalog, locations, runspec_dirs

    base = path.resolve().parent
    return Catalog.load(runspec_dirs(data.get("runspec_dirs", []), base),
                        locations(data.get("dataset_paths", {}), data.get("dataset_root"), base), declared=(data.get("datasets", {}), path))


def _names_of(catalog: Any, name: str) -> Optional[set[str]]:
    """The datasets a name denotes; None when it names nothing (the plan reports that)."""
    try:
        return {d.name for d in catalog.resolve(name)}
    except UserError:
        return None


def _chosen_pairs(data: dict[str, Any], names: tuple[str, ...], path: Path) -> list[list[str]]:
    """--datasets: each name with the metrics the config pairs with it (or with a name holding it), else 'all'."""
    catalog = _catalog(data, path)
    configured = [(pair[0], pair[1], _names_of(catalog, pair[0])) for pair in data.get("dataset_metric", [])]
    pairs: list[list[str]] = []
    for name in names:
        try:
            wanted = {d.name for d in catalog.resolve(name)}
        except UserError as exc:
            raise UserError(f"--datasets: {exc}") from None
        metrics = [metric for entry, metric, held in configured if entry == name or (held is not None and wanted <= held)]
        pairs += [[name, metric] for metric in (metrics or ["all"])]
    return _unique(pairs)


def _aggregates_kept(data: dict[str, Any], path: Path) -> list[Any]:
    """The config's aggregates that still cover a pair of the run (the others would report nothing)."""
    catalog = _catalog(data, path)
    run: set[tuple[str, str]] = set()
    for name, metric in data["dataset_metric"]:
        for dataset in (catalog.resolve(name) if _names_of(catalog, name) is not None else []):
            run |= {(dataset.name, m) for m in (dataset.spec.metrics if metric == "all" else [metric])}
    kept = []
    for metric, names in data["aggregate"]:
        members = [_names_of(catalog, n) for n in names]
        if any(m is None for m in members) or any((d, metric) in run for m in members for d in m or ()):
            kept.append([metric, names])  # an unknown name stays, for the plan to report
    return kept
