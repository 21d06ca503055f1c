"""A dataset and a model given on the command line: `--hf-dataset REPO ...` and `--model-url URL --model ID`.

The dataset becomes an entry of the config's `datasets` (a runspec entry, validated as one) and the
model an entry of `models`, so the run's config.yaml holds them like any other and a resume started
with the same flags continues the same evaluation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lalmeval.errors import UserError

HF_FLAG = "--hf-dataset"
DEFAULT_LANGUAGE = "english"
DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".tsv")


@dataclass(frozen=True)
class HubDataset:
    """The dataset of `--hf-dataset`: a hub id, or a local file or folder standing in for one, and its columns."""

    repo: str
    subset: Optional[str] = None
    split: Optional[str] = None
    audio_column: Optional[str] = None
    target_column: Optional[str] = None
    id_column: Optional[str] = None
    text_column: Optional[str] = None
    instruction: Optional[str] = None
    language: Optional[str] = None
    name: Optional[str] = None
    modality: Optional[str] = None

    @property
    def dataset_name(self) -> str:
        """`--dataset-name`, else the repository's last part with the subset and split: librispeech_asr_clean_test."""
        if self.name:
            return self.name
        stem = Path(self.repo.rstrip("/")).name
        stem = stem[: -len(Path(stem).suffix)] if Path(stem).suffix.lower() in DATA_SUFFIXES else stem
        parts = [stem, self.subset, self.split or "test"]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "_".join(p for p in parts if p)).strip("_") or "dataset"

    def entry(self, metrics: list[str]) -> dict[str, Any]:
        """The runspec entry this dataset declares (a local path made absolute, so the stored config.yaml reads it anywhere)."""
        local = Path(self.repo).expanduser()
        is_local = local.exists() or self.repo.startswith((".", "/", "~")) or local.suffix.lower() in DATA_SUFFIXES
        repo = str(local.resolve()) if is_local else self.repo
        entry: dict[str, Any] = {"hf_repo": repo, "language": self.language or DEFAULT_LANGUAGE, "metrics": list(metrics)}
        given = {"subset": self.subset, "split": self.split, "audio_column": self.audio_column, "target_column": self.target_column,
                 "id_column": self.id_column, "textual_input_column": self.text_column, "instruction": self.instruction}
        entry.update({k: v for k, v in given.items() if v is not None})
        modality = self.modality or ("audio_text" if self.text_column else None)   # a text column is sent, beside the clip
        if modality:
            entry["modality"] = modality
        if modality == "text":  # nothing of the audio is read
            entry["audio_column"] = None
        return entry

    def check(self, metrics: list[str]) -> dict[str, Any]:
        """The entry, validated as a runspec entry is; a problem is one line naming the flag."""
        from lalmeval.catalog.runspecs import read_entries

        if not metrics:
            raise UserError(f"{HF_FLAG} needs --metric (e.g. --metric word_error_rate): the dataset has no runspec listing its metrics")
        entry = self.entry(metrics)
        read_entries({self.dataset_name: entry}, Path(HF_FLAG), "config", "datasets")
        return entry


def model_entry(url: str, model: Optional[str], name: Optional[str]) -> dict[str, Any]:
    """The model of `--model-url URL --model ID [--model-name NAME]` as a config entry."""
    from lalmeval.config.schema import check_url

    if not model:
        raise UserError("--model-url needs --model: the model id sent in each request")
    try:
        check_url(url)
    except ValueError as exc:
        raise UserError(f"--model-url: {exc}") from None
    return {"name": name or model, "url": url, "model": model}


def note_language(dataset: Optional[HubDataset]) -> Optional[str]:
    """The note printed when --language was left out: the language decides normalizer and error unit."""
    if dataset is None or dataset.language:
        return None
    return (f"note: {HF_FLAG}: --language not given, so '{dataset.dataset_name}' is read as English (whisper_english "
            "normalizer, word error unit); give --language for another")
