"""BfclPreprocessor: BFCL's function-calling prompt, as AU-Harness's prompt variants send it.

The row's functions (its `tools` column, mapped as the instruction) are written into the prompt as
indented JSON, each name's dots replaced by underscores (many models refuse dotted tool names); the
runspec's prompt_template places them. In the text variant the user's request follows: the single
turn of BFCL's `question` column (a list holding one turn).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from typing import Any, Optional

from lalmeval.preprocess.base import PREPROCESSORS
from lalmeval.preprocess.general import GeneralPreprocessor
from lalmeval.results.records import Prompt, Sample


def decode(text: Optional[str]) -> Any:
    """A JSON (or Python literal) value from its text; the text itself when it is neither."""
    if text is None:
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return text


def tool_names(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The functions with dots in their names replaced by underscores."""
    return [{**tool, "name": re.sub(r"\.", "_", str(tool.get("name", "")))} for tool in tools]


def single_turn(question: Any) -> Optional[str]:
    """The user's text of a one-turn BFCL question ([text], [[text]] or [[{role, content}]])."""
    while isinstance(question, list) and len(question) == 1:
        question = question[0]
    if isinstance(question, dict):
        question = question.get("content")
    return question if isinstance(question, str) else None


@PREPROCESSORS.register("BfclPreprocessor")
class BfclPreprocessor(GeneralPreprocessor):
    """The functions (instruction column) as indented JSON inside the prompt template, then the question."""

    def prompt(self, sample: Sample, repeat: int = 0) -> Prompt:
        tools = decode(sample.instruction)
        functions = json.dumps(tool_names(tools), indent=4) if isinstance(tools, list) else sample.instruction
        question = single_turn(decode(sample.text_input)) if sample.text_input is not None else None
        return super().prompt(replace(sample, instruction=functions, text_input=question or sample.text_input), repeat)
