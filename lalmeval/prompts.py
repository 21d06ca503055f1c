"""Named system prompts, user prompt add-ons and multiple-choice templates: the shipped file plus a user's file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from lalmeval.errors import UserError, closest
from lalmeval.files import load_yaml

SHIPPED = Path(__file__).with_name("prompts.yaml")
SHIPPED_JUDGE = Path(__file__).with_name("judge_prompts.yaml")
SECTIONS = ("system_prompts", "user_prompt_add_ons", "judge_prompts", "mc_templates")


def _read(path: Path) -> dict[str, dict[str, str]]:
    raw = load_yaml(path, "prompts file") or {}
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected sections {', '.join(SECTIONS)}")
    for key, section in raw.items():
        if key not in SECTIONS:
            raise UserError(f"{path}: unknown section '{key}'{closest(str(key), SECTIONS)}")
        if key == "judge_prompts":
            _check_nested(path, section)
        elif not isinstance(section, dict) or not all(isinstance(v, str) for v in section.values()):
            raise UserError(f"{path}: section '{key}' must map names to texts")
    return raw


def _check_nested(path: Path, section: object) -> None:
    """judge_prompts: metric → variant → judge model (or 'default') → template text."""
    ok = isinstance(section, dict) and all(
        isinstance(variants, dict) and all(isinstance(models, dict) and all(isinstance(t, str) for t in models.values()) for models in variants.values())
        for variants in section.values()
    )
    if not ok:
        raise UserError(f"{path}: section 'judge_prompts' must map metric → variant → judge model → template")


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def load_prompts(user_file: Optional[Path] = None) -> dict[str, dict[str, str]]:
    """The shipped prompts, extended and overridden by `user_file`."""
    shipped = {**_read(SHIPPED), "judge_prompts": _read(SHIPPED_JUDGE).get("judge_prompts", {})}
    prompts = {section: dict(shipped.get(section, {})) for section in SECTIONS}
    if user_file is not None:
        for section, entries in _read(user_file).items():
            prompts[section] = _merge(prompts[section], entries)
    return prompts


def pick(prompts: dict[str, dict[str, str]], section: str, names: list[str]) -> list[str]:
    """The texts for `names` in `section`; an unknown name is an error naming the filter."""
    texts = []
    where = "mc_template" if section == "mc_templates" else f"filters.{section}"
    for name in names:
        if name not in prompts[section]:
            raise UserError(f"{where}: unknown prompt '{name}'{closest(name, prompts[section])}")
        texts.append(prompts[section][name])
    return texts
