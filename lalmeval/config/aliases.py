"""AU-Harness's config key names: read as lalmeval's, each with a one-line note, or refused naming lalmeval's.

AU-Harness (the LALMEval lineage this tool shares its config with) renamed keys over time; its
current sample config and README use `task_metric`, `filter`, `judge_settings`,
`generation_params_override` and `prompt_overrides`. A config written for it runs here unchanged
where the meaning is the same, and the note says which lalmeval key was read; where lalmeval
has no equivalent that would mean the same, the key is refused with what to write instead.
"""

from __future__ import annotations

from typing import Any, Callable

from lalmeval.errors import UserError


def _same(value: Any) -> Any:
    return value


def _filter(value: Any) -> Any:
    # AU-Harness's code reads `length` although its sample config writes `length_filter`: both mean the clip-length range.
    if isinstance(value, dict) and "length" in value and "length_filter" not in value:
        value = {("length_filter" if key == "length" else key): item for key, item in value.items()}
    return value


_TOKENS = ("max_gen_tokens", "max_completion_tokens")


def _generation(value: Any) -> Any:
    """[{model, task, generation_params: {...}}] → generation_overrides entries (max_gen_tokens / max_completion_tokens → max_tokens)."""
    if not isinstance(value, list):
        return value
    out = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("generation_params", {}), dict):
            return value  # the schema names what is wrong with it
        params = {("max_tokens" if key in _TOKENS else key): item for key, item in (entry.get("generation_params") or {}).items()}
        out.append({**{k: v for k, v in entry.items() if k != "generation_params"}, **params})
    return out


# AU-Harness key → (lalmeval key, how the value is read, what the note adds)
ALIASES: dict[str, tuple[str, Callable[[Any], Any], str]] = {
    "task_metric": ("dataset_metric", _same, ""),
    "filter": ("filters", _filter, " (its `length` is length_filter)"),
    "judge_settings": ("judge_properties", _same, ""),
    "generation_params_override": ("generation_overrides", _generation,
                                   " (each entry's generation_params spread into it; max_gen_tokens and max_completion_tokens are max_tokens)"),
}

REFUSED = {
    "prompt_overrides": "write them as prompt_rules: a user_prompt's text as `instruction`, a system_prompt as `system_prompts` "
                        "naming a text of your prompts_file (see Prompts in the README)",
    "logging": "lalmeval keeps no log file setting: every run writes its records, scores and report under output_dir/<run_id>/",
}


def read_aliases(raw: dict[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """The config with AU-Harness's key names read as lalmeval's, and one note line per alias used."""
    for key, advice in REFUSED.items():
        if key in raw:
            raise UserError(f"{source}: '{key}' is AU-Harness's key, which lalmeval does not read: {advice}")
    out, notes = dict(raw), []
    for old, (new, read, extra) in ALIASES.items():
        if old not in out:
            continue
        if new in out:
            raise UserError(f"{source}: both '{new}' and '{old}' (AU-Harness's name for it) are given; keep '{new}'")
        out[new] = read(out.pop(old))
        notes.append(f"note: {source}: '{old}' is AU-Harness's name for '{new}'; read as {new}{extra}")
    return out, notes
