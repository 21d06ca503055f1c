"""Numbers in configs and runspecs: a boolean is never one (pydantic would read `true` as 1)."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ValidationInfo, field_validator


def takes_number_not_bool(annotation: Any) -> bool:
    """Whether a field's type takes a number (int or float) and no boolean."""
    kinds: set[Any] = set()
    stack = [annotation]
    while stack:
        item = stack.pop()
        args = get_args(item)
        if args:
            stack.extend(args)
        else:
            kinds.add(item)
    return bool(kinds & {int, float}) and bool not in kinds


class NoBooleanNumbers(BaseModel):
    """A model whose number fields refuse `true` and `false` (`batch_size: true` would silently be one request at a time)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name and takes_number_not_bool(cls.model_fields[info.field_name].annotation):
            raise ValueError("expected a number, not a boolean")
        return value
