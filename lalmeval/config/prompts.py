"""Named system prompts, user prompt add-ons and multiple-choice templates: the shipped file plus a user's file."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Optional

from lalmeval.errors import UserError, closest
from lalmeval.files import load_yaml

SHIPPED = Path(__file__).with_name("prompts.yaml")
SHIPPED_JUDGE = Path(__file__).with_name("judge_prompts.yaml")
SECTIONS = ("system_prompts", "user_prompt_add_ons", "judge_prompts", "mc_templates")
MC_REQUIRED = ("question", "options")
MC_PLACEHOLDERS = (*MC_REQUIRED, "labels")
_BRACED = re.compile(r"\{(\s*[A-Za-z_]\w*\s*)\}")


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
        elif key == "mc_templates":
            for name, template in section.items():
                _check_mc_template(path, name, template)
    return raw


def _check_mc_template(path: Path, name: str, template: str) -> None:
    """A multiple-choice template shows {question} and {options}; a brace that looks like a
    misspelt placeholder ({option}, {lables}) would be sent as written, so it is refused too."""
    where = f"{path}: mc_templates.{name}"
    missing = [f"{{{p}}}" for p in MC_REQUIRED if f"{{{p}}}" not in template]
    if missing:
        raise UserError(f"{where}: the template never shows {' and '.join(missing)} (it must contain {{question}} and {{options}}; {{labels}} is optional)")
    for word in _BRACED.findall(template):
        near = difflib.get_close_matches(word.strip().lower(), MC_PLACEHOLDERS, n=1, cutoff=0.75)
        if word not in MC_PLACEHOLDERS and near:
            raise UserError(f"{where}: '{{{word}}}' is not filled in (did you mean '{{{near[0]}}}'?); the placeholders are "
                            f"{', '.join(f'{{{p}}}' for p in MC_PLACEHOLDERS)}, other braces are kept as written")


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
