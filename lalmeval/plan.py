"""Resolve a config against the runspecs into what a run will do — no request is sent here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from lalmeval.config import Config, ModelInfo, TemperatureOverride
from lalmeval.data.filters import skip_reason
from lalmeval.errors import UserError
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.judge import check_templates
from lalmeval.metrics import METRICS, NORMALIZERS
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.preprocess import PREPROCESSORS
from lalmeval.prompts import load_prompts, pick
from lalmeval.runspecs import Catalog, Dataset, runspec_dirs


@dataclass
class Plan:
    """The datasets, dataset–metric pairs and prompt texts of a run."""

    config: Config
    base: Path
    catalog: Catalog
    pairs: list[tuple[Dataset, str]]
    system_texts: list[str]
    add_on_texts: list[str]
    skipped: dict[str, str] = field(default_factory=dict)
    judge_templates: dict[str, Any] = field(default_factory=dict)

    @property
    def uses_judge(self) -> bool:
        return any(metric.startswith("llm_judge") for _, metric in self.pairs)

    @property
    def datasets(self) -> list[Dataset]:
        seen: dict[str, Dataset] = {}
        for dataset, _ in self.pairs:
            seen.setdefault(dataset.name, dataset)
        return list(seen.values())

    def params(self, model: ModelInfo, dataset: Dataset) -> dict[str, Any]:
        """Generation parameters for this model on this dataset."""
        params: dict[str, Any] = {"temperature": self.temperature(model, dataset)}
        if model.max_tokens is not None and model.inference_type != "transcription":
            params["max_tokens"] = model.max_tokens
        return params

    def temperature(self, model: ModelInfo, dataset: Dataset) -> float:
        """The most specific override wins: model+task, then task (dataset > task type > category), then model."""
        best: Optional[tuple[int, int]] = None
        value = model.temperature
        for override in self.config.temperature_overrides:
            rank = _specificity(override, model, dataset)
            if rank is not None and (best is None or rank > best):
                best, value = rank, override.temperature
        return value


def _specificity(override: TemperatureOverride, model: ModelInfo, dataset: Dataset) -> Optional[tuple[int, int]]:
    if override.model is not None and override.model != model.name:
        return None
    level = 0
    if override.task is not None:
        levels = {dataset.name: 3, dataset.task_type: 2, dataset.category: 1}
        if override.task not in levels:
            return None
        level = levels[override.task]
    kind = 2 if override.model and override.task else (1 if override.task else 0)
    return kind, level


def _check_processors(dataset: Dataset) -> None:
    where = f"{dataset.source}: dataset '{dataset.name}'"
    PREPROCESSORS.get(dataset.spec.preprocessor, where=f"{where}: preprocessor")
    POSTPROCESSORS.get(dataset.spec.postprocessor, where=f"{where}: postprocessor")
    if dataset.spec.normalizer is not None:
        NORMALIZERS.get(dataset.spec.normalizer, where=f"{where}: normalizer")
    for metric in dataset.spec.metrics:
        METRICS.get(metric, where=f"{where}: metrics")


def _resolve(catalog: Catalog, name: str, where: str) -> list[Dataset]:
    """The datasets `name` denotes; an unknown name is an error prefixed with where it was written."""
    try:
        return catalog.resolve(name)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _pairs(config: Config, catalog: Catalog, source: str) -> list[tuple[Dataset, str]]:
    pairs: list[tuple[Dataset, str]] = []
    for index, (name, metric) in enumerate(config.dataset_metric):
        where = f"{source}: dataset_metric[{index}]"
        datasets = _resolve(catalog, name, where)
        for dataset in datasets:
            _check_processors(dataset)
            if metric != "all":
                METRICS.get(metric, where=where)
            metrics = dataset.spec.metrics if metric == "all" else [metric]
            if not metrics:
                raise UserError(f"{where}: metric 'all' but dataset '{dataset.name}' lists no metrics in {dataset.source}")
            pairs.extend((dataset, m) for m in metrics if (dataset, m) not in pairs)
    return pairs


def build_plan(config: Config, config_path: Path) -> Plan:
    """Check everything a run needs (runspecs, names, metrics, prompts) and return the Plan."""
    base = config_path.resolve().parent
    source = str(config_path)  # errors name the config file as the user gave it
    catalog = Catalog.load(runspec_dirs(config.runspec_dirs, base))
    for model in config.models:
        PROTOCOLS.get(model.inference_type, where=f"{source}: models '{model.name}'")
    for index, override in enumerate(config.temperature_overrides):
        if override.task is not None:
            _resolve(catalog, override.task, f"{source}: temperature_overrides[{index}].task")
    for index, (metric, names) in enumerate(config.aggregate):
        METRICS.get(metric, where=f"{source}: aggregate[{index}]")
        for name in names:
            _resolve(catalog, name, f"{source}: aggregate[{index}]")
    prompts = load_prompts((base / config.prompts_file) if config.prompts_file else None)
    system_texts = pick(prompts, "system_prompts", config.filters.system_prompts)
    add_on_texts = pick(prompts, "user_prompt_add_ons", config.filters.user_prompt_add_ons)
    pairs = _pairs(config, catalog, source)
    for metric in sorted({m for _, m in pairs}):
        METRICS.get(metric).check(config)
    check_templates(prompts["judge_prompts"])
    skipped = {d.name: r for d, _ in pairs if (r := skip_reason(d, config.filters))}
    kept = [(d, m) for d, m in pairs if d.name not in skipped]
    for dataset, metric in kept:
        METRICS.get(metric).check_dataset(dataset)
    return Plan(config, base, catalog, kept, system_texts, add_on_texts, skipped, prompts["judge_prompts"])
