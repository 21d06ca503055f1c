"""Resolve a config against the runspecs into what a run will do — no request is sent here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from lalmeval.catalog.runspecs import Catalog, Dataset, locations, runspec_dirs
from lalmeval.config.generation import merge
from lalmeval.config.languages import iso_code
from lalmeval.config.prompts import load_prompts, pick
from lalmeval.config.schema import Config, ModelInfo, PromptRule
from lalmeval.config.secrets import Redactor, config_secrets, redacted_errors
from lalmeval.data.filters import skip_reason
from lalmeval.errors import UserError
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.inference.replicas import ModelGroup, model_groups
from lalmeval.judging.judge import check_prompt_model, check_templates
from lalmeval.judging.templates import DEFAULT, JudgeTemplate, resolve
from lalmeval.metrics import METRICS, NORMALIZERS
from lalmeval.metrics.reading import READING_METRICS
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.preprocess import PREPROCESSORS
from lalmeval.preprocess.base import PromptSettings
from lalmeval.run.applies import check_settings_apply


@dataclass
class Plan:
    """The datasets, dataset–metric pairs and prompt texts of a run."""

    config: Config
    base: Path
    catalog: Catalog
    pairs: list[tuple[Dataset, str]]
    skipped: dict[str, str] = field(default_factory=dict)
    judge_templates: dict[tuple[str, str], JudgeTemplate] = field(default_factory=dict)  # (dataset, judge metric) → template
    groups: list[ModelGroup] = field(default_factory=list)
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)
    group_scores: list[tuple[str, list[str]]] = field(default_factory=list)  # (metric, [runspec group]) for each group dataset_metric names

    @property
    def uses_judge(self) -> bool:
        bases = [(dataset, metric.removeprefix("spoken:")) for dataset, metric in self.pairs]   # spoken:llm_judge_* judges what was said
        return any(metric.startswith("llm_judge") or (metric == "accuracy" and dataset.spec.answer_extraction == "llm")
                   or self.reads_with_judge(dataset, metric) for dataset, metric in bases)

    def reads_with_judge(self, dataset: Dataset, metric: str) -> bool:
        """Whether `metric` reads this dataset's replies through the judge (reading: judge, the runspec's or the config's)."""
        return metric in READING_METRICS and (dataset.spec.reading or self.config.reading) == "judge"

    @property
    def aggregates(self) -> list[tuple[str, list[str]]]:
        """The config's aggregates, then a group score for every runspec group the run names, then each folder
        read file by file with each of its metrics: its files' average is the tool's own headline (Twinkle
        Eval's average accuracy over the files)."""
        specs = [(metric, list(names)) for metric, names in self.config.aggregate]
        specs += [g for g in self.group_scores if g not in specs]
        files = Counter((dataset.group, metric) for dataset, metric in self.pairs if dataset.group)
        for (group, metric), count in files.items():
            if count > 1 and (metric, [group]) not in specs:
                specs.append((metric, [group]))
        return specs

    @property
    def datasets(self) -> list[Dataset]:
        seen: dict[str, Dataset] = {}
        for dataset, _ in self.pairs:
            seen.setdefault(dataset.name, dataset)
        return list(seen.values())

    def params(self, model: ModelInfo, dataset: Dataset) -> dict[str, Any]:
        """Generation parameters for this model on this dataset: see lalmeval/config/generation.py for the layers."""
        base = {"temperature": model.temperature, **({"max_tokens": model.max_tokens} if model.max_tokens is not None else {})}
        layers: list[tuple[tuple[int, int], dict[str, Any]]] = [((-1, 0), {**base, **model.generation_kwargs.given()}),
                                                              ((0, 1), dataset.spec.generation_kwargs.given())]
        for override in self.config.temperature_overrides:
            if (rank := _specificity(override, model, dataset)) is not None:
                layers.append((rank, {"temperature": override.temperature}))
        for entry in self.config.generation_overrides:
            if (rank := _specificity(entry, model, dataset)) is not None:
                layers.append((rank, {k: v for k, v in entry.given().items() if k not in ("model", "task")}))
        params = merge([layer for _, layer in sorted(layers, key=lambda item: item[0])])
        if model.inference_type == "transcription":
            params.pop("max_tokens", None)  # the transcription API has no such field
            if dataset.spec.transcription_prompt is not None:  # a form field like temperature: recorded with the params
                params["prompt"] = dataset.spec.transcription_prompt
        return params

    def temperature(self, model: ModelInfo, dataset: Dataset) -> float:
        """The temperature this model gets on this dataset."""
        return self.params(model, dataset)["temperature"]

    def repeats(self, dataset: Dataset) -> int:
        """How many times each sample is asked: the runspec's repeat_runs, else the config's."""
        return dataset.spec.repeat_runs or self.config.repeat_runs

    def matching_rules(self, model: ModelInfo, dataset: Dataset) -> list[tuple[int, PromptRule]]:
        """(index, rule) of every prompt rule that applies to this model on this dataset, the least specific first."""
        ranked = [(rank, i, r) for i, r in enumerate(self.config.prompt_rules) if (rank := _rule_rank(r, model, dataset)) is not None]
        return [(i, r) for _, i, r in sorted(ranked, key=lambda x: (x[0], x[1]))]

    def prompt_settings(self, model: ModelInfo, dataset: Dataset) -> PromptSettings:
        """System prompts, add-ons, instruction and MC template for this model on this dataset (prompt rules applied)."""
        config = self.config
        chosen: dict[str, Any] = {"system_prompts": config.filters.system_prompts, "user_prompt_add_ons": config.filters.user_prompt_add_ons,
                                  "instruction": None, "mc_template": dataset.spec.mc_template or "mc_options"}
        for _, rule in self.matching_rules(model, dataset):
            chosen.update({k: v for k, v in rule.model_dump(exclude={"model", "task", "language"}).items() if v is not None})
        shuffle = dataset.spec.shuffle_options if dataset.spec.shuffle_options is not None else config.shuffle_options
        return PromptSettings(tuple(pick(self.prompts, "system_prompts", chosen["system_prompts"])),
                              tuple(pick(self.prompts, "user_prompt_add_ons", chosen["user_prompt_add_ons"])),
                              chosen["instruction"], pick(self.prompts, "mc_templates", [chosen["mc_template"]])[0], shuffle, config.seed)


def _task_level(task: Optional[str], dataset: Dataset) -> Optional[int]:
    """0 for no task; 1, 2, 3, 4 when `task` names the dataset's category, task type, folder entry or the dataset; None otherwise."""
    if task is None:
        return 0
    return {dataset.category: 1, dataset.task_type: 2, **({dataset.group: 3} if dataset.group else {}), dataset.name: 4}.get(task)


def _specificity(override: Any, model: ModelInfo, dataset: Dataset) -> Optional[tuple[int, int]]:
    """(kind, task level) of an override that applies: model+task 2 > task 1 > model only 0."""
    if override.model is not None and override.model != model.name:
        return None
    level = _task_level(override.task, dataset)
    if level is None:
        return None
    kind = 2 if override.model and override.task else (1 if override.task else 0)
    return kind, level


def _rule_rank(rule: PromptRule, model: ModelInfo, dataset: Dataset) -> Optional[tuple[int, int]]:
    """(how many of model / task / language the rule names, task level) when it applies, else None."""
    if rule.model is not None and rule.model != model.name:
        return None
    if rule.language is not None and iso_code(rule.language) != dataset.iso_language:
        return None
    level = _task_level(rule.task, dataset)
    if level is None:
        return None
    return sum(x is not None for x in (rule.model, rule.task, rule.language)), level


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


def _group_scores(config: Config, catalog: Catalog, pairs: list[tuple[Dataset, str]]) -> list[tuple[str, list[str]]]:
    """(metric, [group]) for each runspec group dataset_metric names and each metric its datasets are scored with."""
    out: list[tuple[str, list[str]]] = []
    for name, _ in config.dataset_metric:
        if name in catalog.groups:
            members = {d.name for d in catalog.members(name)}
            for metric in dict.fromkeys(m for d, m in pairs if d.name in members):
                if (metric, [name]) not in out:
                    out.append((metric, [name]))
    return out


def _check_entries_kept(config: Config, catalog: Catalog, skipped: dict[str, str], source: str) -> None:
    """Dataset-level filters choose among the datasets an entry names; an entry left with none evaluates nothing."""
    for index, (name, _) in enumerate(config.dataset_metric):
        datasets = catalog.resolve(name)
        if all(d.name in skipped for d in datasets):
            why = "; ".join(f"{d.name}: {skipped[d.name]}" for d in datasets[:3]) + ("; …" if len(datasets) > 3 else "")
            what = f"dataset '{name}'" if len(datasets) == 1 and datasets[0].name == name else f"every dataset of '{name}'"
            raise UserError(f"{source}: dataset_metric[{index}]: the filters leave out {what}, so nothing would be evaluated ({why})")


def build_plan(config: Config, config_path: Path) -> Plan:
    """Check everything a run needs (runspecs, names, metrics, prompts) and return the Plan."""
    with redacted_errors(Redactor(config_secrets(config))):  # messages quote URLs and generation settings
        return _checked_plan(config, config_path)


def _checked_plan(config: Config, config_path: Path) -> Plan:
    base = config_path.resolve().parent
    source = str(config_path)  # errors name the config file as the user gave it
    try:
        catalog = Catalog.load(runspec_dirs(config.runspec_dirs, base), locations(config.dataset_paths, config.dataset_root, base),
                               declared=(config.datasets, config_path))
    except UserError as exc:
        raise UserError(f"{source}: {exc}" if str(exc).startswith("dataset_paths") else str(exc)) from None
    for model in config.models:
        PROTOCOLS.get(model.inference_type, where=f"{source}: models '{model.name}'")
    for kind in ("temperature_overrides", "generation_overrides"):
        for index, override in enumerate(getattr(config, kind)):
            if override.task is not None:  # a misspelt task would make the override apply nowhere, silently
                _resolve(catalog, override.task, f"{source}: {kind}[{index}].task")
    for index, (metric, names) in enumerate(config.aggregate):
        METRICS.get(metric, where=f"{source}: aggregate[{index}]")
        for name in names:
            _resolve(catalog, name, f"{source}: aggregate[{index}]")
    prompts = load_prompts((base / config.prompts_file) if config.prompts_file else None)
    pick(prompts, "system_prompts", config.filters.system_prompts)  # unknown names fail before anything else
    pick(prompts, "user_prompt_add_ons", config.filters.user_prompt_add_ons)
    pairs = _pairs(config, catalog, source)
    for metric in sorted({m for _, m in pairs}):
        METRICS.get(metric).check(config)
    check_templates(prompts["judge_prompts"])
    check_prompt_model(config.judge_properties, prompts["judge_prompts"], source)
    skipped = {d.name: r for d, _ in pairs if (r := skip_reason(d, config.filters))}
    _check_entries_kept(config, catalog, skipped, source)
    kept = [(d, m) for d, m in pairs if d.name not in skipped]
    for dataset, metric in kept:
        METRICS.get(metric).check_dataset(dataset)
        if getattr(METRICS.get(metric), "needs_judge", lambda d: False)(dataset) and config.judge_properties is None:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': answer_extraction llm needs judge_properties in the config (see sample_config.yaml)")
        if metric in READING_METRICS and (dataset.spec.reading or config.reading) == "judge" and config.judge_properties is None:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': reading judge ({metric}) needs judge_properties in the config "
                            "(see sample_config.yaml), or reading careful")
    templates = _judge_templates(config, kept, prompts["judge_prompts"])
    plan = Plan(config, base, catalog, kept, skipped, templates, model_groups(config), prompts, _group_scores(config, catalog, kept))
    _check_rules(plan)
    check_settings_apply(plan)
    return plan


def _judge_templates(config: Config, pairs: list[tuple[Dataset, str]], judge_prompts: dict[str, Any]) -> dict[tuple[str, str], JudgeTemplate]:
    """The judge template of every (dataset, judge metric): the runspec's judge_template (for that metric), else default."""
    props = config.judge_properties
    prompt_model = (props.judge_prompt_model_override or props.judge_model) if props else ""
    out: dict[tuple[str, str], JudgeTemplate] = {}
    for dataset, metric in pairs:
        if not getattr(METRICS.get(metric), "uses_template", False):
            continue
        per_metric = isinstance(dataset.spec.judge_template, dict)
        where = f"{dataset.source}: dataset '{dataset.name}': judge_template{'.' + metric if per_metric else ''}"
        try:
            template = resolve(dataset.spec.judge_template_for(metric) or DEFAULT, metric, dataset.source.parent, judge_prompts, prompt_model)
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
        if dataset.spec.format is None and not dataset.spec.transcript_column and template.variant_for(True, False) is None \
                and template.variant_for(False, False) is None:
            raise UserError(f"{where}: judge template '{template.name}' shows the judge a transcript of the audio, and the dataset has no transcript_column")
        out[(dataset.name, metric)] = template
    return out


def _check_rules(plan: Plan) -> None:
    """Prompt rules and MC templates name things that exist; every (model, dataset) resolves."""
    for index, rule in enumerate(plan.config.prompt_rules):
        where = f"prompt_rules[{index}]"
        if rule.task is not None:
            try:
                plan.catalog.resolve(rule.task)
            except UserError as exc:
                raise UserError(f"{where}: {exc}") from None
        if rule.language is not None:
            iso_code(rule.language, where=f"{where}.language")
    for model in plan.config.models:
        for dataset in plan.datasets:
            try:
                plan.prompt_settings(model, dataset)
            except UserError as exc:
                raise UserError(f"model '{model.name}' on dataset '{dataset.name}' ({dataset.source}): {exc}") from None

