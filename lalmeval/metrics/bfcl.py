"""bfcl_match_score: BFCL's function-call match, as AU-Harness scores its BFCL audio and text tasks.

The reply is read as a JSON (or Python) list of calls `[{"name": {"arg": value}}]` — the whole reply,
else its ```json block (bare keys quoted first). The reference holds BFCL's ground truth (each call's
arguments with their allowed values) and the row's functions (a runspec target_column list
["reference", "tools"]). A sample is right when the reply makes as many calls as the reference and
each reference call is matched by a distinct reply call, in any order: the same function (dots read
as underscores), no argument the reference does not know, every required argument present; list
and dict arguments must equal one of the allowed values after BFCL's string standardization
(lower case, spaces and , . / - _ * ^ removed). Like AU-Harness, scalar arguments are not compared:
their presence is what counts. No calls expected and none made is right (BFCL's irrelevance).
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.errors import UserError
from lalmeval.metrics.base import METRICS, SampleScore
from lalmeval.metrics.percent import PercentCorrect
from lalmeval.preprocess.bfcl import decode, tool_names
from lalmeval.results.records import Record

_TYPES = {"array": list, "tuple": list, "dict": dict}  # the others ("string", "integer", ...) are scalars


def calls_in(reply: str) -> Any:
    """The reply's calls: its whole text as JSON or a Python literal, else its ```json block; None when neither parses."""
    whole = decode(reply.strip())
    if not isinstance(whole, str):
        return whole
    block = re.search(r"```json(.*?)```", reply, re.DOTALL)
    if block is None:
        return None
    value = decode(re.sub(r"([{,])\s*([a-zA-Z_][\w\.]*)\s*:", r'\1"\2":', block.group(1).strip()))
    return None if isinstance(value, str) else value


def standard(value: Any) -> Any:
    """BFCL's comparison form: strings lowered with spaces and , . / - _ * ^ removed, containers recursively."""
    if isinstance(value, str):
        return re.sub(r"[ \,\.\/\-\_\*\^]", "", value).lower().replace("'", '"')
    if isinstance(value, list):
        return [standard(v) for v in value]
    if isinstance(value, dict):
        return {k: standard(v) for k, v in value.items()}
    return value


def _dict_matches(got: Any, allowed: dict) -> bool:
    if not isinstance(got, dict) or any(k not in allowed for k in got):
        return False
    if any(k not in got and v not in ("", None) for k, v in allowed.items()):
        return False
    for key, value in got.items():
        want = standard(allowed[key])
        if (standard(value) not in want) if isinstance(want, list) else standard(value) != want:
            return False
    return True


def _value_matches(got: Any, allowed: Any, kind: type) -> bool:
    """A list or dict argument against its allowed values (scalars are not compared, as in AU-Harness)."""
    got, allowed = standard(got), standard(allowed)
    if allowed in ("", None) or kind not in (list, dict):
        return True
    if kind is dict:
        if isinstance(allowed, dict):
            return _dict_matches(got, allowed)
        if isinstance(allowed, list) and allowed and all(isinstance(a, dict) for a in allowed):
            return any(_dict_matches(got, a) for a in allowed)
        return isinstance(allowed, list) and got in allowed
    if isinstance(allowed, list) and allowed and all(isinstance(a, list) for a in allowed):
        return any(isinstance(got, list) and len(got) == len(option)
                   and all(_dict_matches(g, o) if isinstance(o, dict) and isinstance(g, dict) else g == o for g, o in zip(got, option))
                   for option in allowed)
    return got in allowed if isinstance(allowed, list) else got == allowed


def call_matches(call: Any, reference: dict, required: dict[str, list[tuple[str, str]]]) -> bool:
    """One reply call against one reference call."""
    if not isinstance(call, dict) or not call:
        return False
    name, want_name = next(iter(call)), next(iter(reference))
    if re.sub(r"\.", "_", name) != re.sub(r"\.", "_", want_name):
        return False
    args, allowed = call[name], reference[want_name]
    if not isinstance(args, dict) or any(k not in allowed for k in args):
        return False
    needed = required.get(name) or required.get(want_name)
    if needed is None:
        return False
    for param, kind in needed:
        if param not in args or param not in allowed:
            return False
        if not _value_matches(args[param], allowed[param], _TYPES.get(kind, str)):
            return False
    return True


def reference_calls(reference: str) -> tuple[list[dict], dict[str, list[tuple[str, str]]]]:
    """The ground-truth calls (named as the functions are, dots as underscores) and each function's required arguments."""
    data = json.loads(reference)
    truth, tools = decode(data["reference"]) if isinstance(data["reference"], str) else data["reference"], data["tools"]
    tools = decode(tools) if isinstance(tools, str) else tools
    full = {str(t["name"]).split(".")[-1]: str(t["name"]) for t in tools}
    calls = [{re.sub(r"\.", "_", full.get(name, name)): args for name, args in call.items()} for call in truth]
    required = {t["name"]: [(p, t["parameters"]["properties"][p]["type"]) for p in t["parameters"].get("required", [])] for t in tool_names(tools)}
    return calls, required


def matches(reply_calls: Any, truth: list[dict], required: dict[str, list[tuple[str, str]]]) -> bool:
    """As many calls as the reference, each reference call matched by a distinct reply call, in any order."""
    if not isinstance(reply_calls, list) or len(reply_calls) != len(truth):
        return False
    left = list(reply_calls)
    for want in truth:
        hit = next((i for i, call in enumerate(left) if call_matches(call, want, required)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


@METRICS.register("bfcl_match_score")
class BfclMatchScore(PercentCorrect):
    """Percentage of replies whose calls match BFCL's ground truth."""

    name = "bfcl_match_score"
    display_fields = frozenset({"calls"})

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        if not isinstance(dataset.spec.target_column, list):
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': metric 'bfcl_match_score' needs the ground truth and the functions: "
                            'set target_column to the two columns, e.g. ["reference", "tools"]')

    def score_record(self, record: Record) -> SampleScore:
        try:
            truth, required = reference_calls(record.reference or "")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return {"score": None, "reason": f"unreadable ground truth: {exc}"}
        calls: Optional[Any] = calls_in(record.prediction or "")
        return {"score": 1.0 if matches(calls, truth, required) else 0.0, "calls": calls}
