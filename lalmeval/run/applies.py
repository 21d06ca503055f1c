"""Settings that cannot apply to what they reach are refused at start, never accepted and ignored.

A key that exists has an effect; where the rest of the config (or a dataset's layout) makes a
setting do nothing, `validate` and `run` stop with one line saying which setting, where, and
what to write instead:

- a prompt rule's `instruction` on a dataset whose rows carry their own (an instruction column,
  e.g. Kimi's `question`; a message list, EvalScope's general_vqa): the row's would win;
- a prompt rule's `mc_template` on a dataset without options;
- `filters.shuffle` without `filters.num_samples` (there is nothing to draw);
- on a `transcription` model — whose request is a clip, a language, a temperature and a prompt —
  system prompts, an `audio_format`, `max_tokens` or other generation settings, and datasets with
  images, message lists or dialogues;
- a model's `long_audio` without its `chunk_size` (no audio is ever longer than no limit);
- an `aggregate` whose metric scores none of the datasets it names in this run (an empty aggregate);
- a runspec's `protocol` that presets only scoring fields (normalizer, error_unit) on a dataset scored by a
  metric that reads neither (accuracy, a judge): the score would carry a label that changed nothing.
"""

from __future__ import annotations

from typing import Any

from lalmeval.catalog.protocols import resolve as resolve_protocol
from lalmeval.catalog.runspecs import CHOICE_FORMATS, Dataset
from lalmeval.config.schema import ModelInfo
from lalmeval.errors import UserError
from lalmeval.metrics import METRICS
from lalmeval.metrics.reading import READING_METRICS


def own_instruction(dataset: Dataset) -> str:
    """Why this dataset's rows bring their own instruction ('' when they do not)."""
    spec = dataset.spec
    if spec.messages_column or spec.format == "general_vqa":
        return f"its rows are whole message lists (messages_column '{spec.messages_column or 'messages'}')"
    column = spec.additional_instruction_column or ("question" if spec.format == "kimi" else None)
    if column:
        kind = f"format {spec.format}, " if spec.format else ""
        return f"its rows carry their own instruction ({kind}column '{column}'), which wins over a rule's"
    return ""


def _has_options(dataset: Dataset) -> bool:
    spec = dataset.spec
    return bool(spec.choices or spec.choices_column or spec.format in CHOICE_FORMATS)


def _check_rules(plan: Any, model: ModelInfo, dataset: Dataset) -> None:
    for index, rule in plan.matching_rules(model, dataset):
        where = f"prompt_rules[{index}]"
        if rule.instruction is not None and (why := own_instruction(dataset)):
            raise UserError(f"{where} sets an instruction that cannot apply to dataset '{dataset.name}' (model '{model.name}'): {why}. "
                            f"Narrow the rule's task or language so it does not reach it, or map no instruction column in {dataset.source}")
        if rule.mc_template is not None and not _has_options(dataset):
            raise UserError(f"{where} sets mc_template, which cannot apply to dataset '{dataset.name}' (model '{model.name}'): it has no "
                            "options; narrow the rule's task")


def _check_transcription(plan: Any, model: ModelInfo, dataset: Dataset) -> None:
    where = f"models '{model.name}' (inference_type transcription)"
    if plan.prompt_settings(model, dataset).system_texts:
        raise UserError(f"{where}: a transcription request has no system message, so the system prompts reaching dataset "
                        f"'{dataset.name}' (filters.system_prompts or prompt_rules) cannot apply; use a chat model or drop them")
    spec = dataset.spec
    if spec.image_column or spec.messages_column or spec.turns_column or spec.format in ("general_vqa", "general_vmcq"):
        raise UserError(f"{where}: dataset '{dataset.name}' has images, message lists or dialogues, which a transcription request "
                        "cannot carry; evaluate it with a chat model")


def _check_model(model: ModelInfo) -> None:
    # A setting left at its default changes nothing wherever it stands: a run's stored config.yaml spells every default out.
    given = {k for k in model.model_fields_set if getattr(model, k) != ModelInfo.model_fields[k].default}
    where = f"models '{model.name}'"
    if "long_audio" in given and model.chunk_size is None:
        raise UserError(f"{where}: long_audio says what to do with audio longer than chunk_size, and chunk_size is not set")
    if model.inference_type == "speech":
        _check_speech(model, given)
    if model.inference_type != "transcription":
        return
    extra = sorted(k for k in model.generation_kwargs.given() if k != "temperature")
    for key, present in (("audio_format", "audio_format" in given), ("max_tokens", model.max_tokens is not None),
                         (f"generation_kwargs ({', '.join(extra)})", bool(extra))):
        if present:
            raise UserError(f"{where}: {key} cannot apply to inference_type transcription, whose request sends a clip, the language, "
                            "the temperature and a prompt; drop it")


def _check_speech(model: ModelInfo, given: set[str]) -> None:
    """A text-to-speech request sends the text, the voice and the format: a setting for anything else would do nothing."""
    extra = sorted(model.generation_kwargs.given())
    for key, present in (("audio_format", "audio_format" in given), ("max_tokens", model.max_tokens is not None),
                         ("temperature", "temperature" in given), ("chunk_size", model.chunk_size is not None),
                         (f"generation_kwargs ({', '.join(extra)})", bool(extra))):
        if present:
            raise UserError(f"models '{model.name}': {key} cannot apply to inference_type speech, whose request sends the text to say, "
                            "audio.voice and audio.format; drop it")


def _check_speech_data(model: ModelInfo, dataset: Dataset) -> None:
    if dataset.spec.modality != "text" or dataset.spec.image_column or dataset.spec.messages_column:
        raise UserError(f"models '{model.name}' (inference_type speech): dataset '{dataset.name}' sends audio, images or message lists, "
                        "which a text-to-speech request cannot carry; evaluate it on a text dataset (modality: text)")


def _check_aggregates(plan: Any) -> None:
    for index, (metric, names) in enumerate(plan.config.aggregate):
        named = {d.name for name in names for d in plan.catalog.resolve(name)}
        if not any(d.name in named and m == metric for d, m in plan.pairs):
            raise UserError(f"aggregate[{index}]: no dataset it names ({', '.join(names)}) is scored with {metric} in this run, so the "
                            f"aggregate would be empty; name datasets that dataset_metric pairs with {metric}, or drop it")


# Runspec fields only a metric reads: a protocol presetting nothing else changes only the metrics that read them.
SCORING_FIELDS = frozenset({"normalizer", "error_unit", "reading"})


def _reads(metric: str, dataset: Dataset) -> frozenset[str]:
    """The scoring fields `metric` reads on `dataset`: its own, and `reading` for the metrics that read replies."""
    return METRICS.get(metric).reads_fields(dataset) | ({"reading"} if metric in READING_METRICS else frozenset())


def _check_protocols(plan: Any) -> None:
    for dataset, metric in plan.pairs:
        spec = dataset.spec
        if "protocol" not in spec.model_fields_set or spec.reproduces:  # a peer's entry names whose convention it follows
            continue
        protocol = resolve_protocol(spec.protocol, f"{dataset.source}: dataset '{dataset.name}': protocol")
        preset = set(protocol.fields(dataset.iso_language))
        if not preset or preset - SCORING_FIELDS or preset & _reads(metric, dataset) or METRICS.get(metric).reads_protocol:
            continue
        readers = [m for m in METRICS.names() if preset & _reads(m, dataset)]
        raise UserError(f"{dataset.source}: dataset '{dataset.name}': protocol '{spec.protocol}' sets {', '.join(sorted(preset))}, which "
                        f"{metric} does not read, so it cannot change that score: drop `protocol`, or score the dataset with "
                        f"{' or '.join(readers)}")


def check_settings_apply(plan: Any) -> None:
    """Refuse (UserError, one line) every setting this plan would read and then not use."""
    filters = plan.config.filters
    if filters.shuffle and not filters.num_samples:
        raise UserError("filters.shuffle draws filters.num_samples samples at random, and num_samples is not set")
    _check_aggregates(plan)
    _check_protocols(plan)
    for model in plan.config.models:
        _check_model(model)
        for dataset in plan.datasets:
            _check_rules(plan, model, dataset)
            if model.inference_type == "transcription":
                _check_transcription(plan, model, dataset)
            if model.inference_type == "speech":
                _check_speech_data(model, dataset)
