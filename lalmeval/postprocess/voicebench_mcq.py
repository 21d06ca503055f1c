"""VoiceBench's multiple-choice reading as lmms-eval runs it (mmsu, openbookqa): the VoiceBenchMcqPostprocessor.

lmms_eval/tasks/voicebench/utils.py voicebench_process_results_mcq (github.com/EvolvingLMMs-Lab/lmms-eval
@ 75571cfe) reads a reply's option letter from VoiceBench's table of phrasings: the reply in lower case,
a leading "<1>" / "<2>" / "<3>" dropped, then the first phrasing of the table (in its order, each tried with
a, b, c, d in turn) that the reply contains gives the letter; else a reply that is just the letter, or
opens with it and one of . , : ); else "would be a." / "would be \"a." / one named answer give A; else
no letter, which the peer scores wrong (it draws no random letter here). Exact match against the
reference letter follows, as `accuracy` does with this postprocessor's labels.
"""

from __future__ import annotations

from typing import Optional

from lalmeval.postprocess.base import POSTPROCESSORS, Postprocessor

# VoiceBench's phrasings, in its order; [CHOICE] stands for the letter (lower case).
PHRASINGS: tuple[str, ...] = (
    "答案是[CHOICE]",
    "答案是 [CHOICE]",
    "答案是选项[CHOICE]",
    "答案应该是[CHOICE]",
    "答案应该是 [CHOICE]",
    "答案就是选项[CHOICE]",
    "答案是‘[CHOICE]",
    "是[CHOICE]：",
    "答案选[CHOICE]",
    "[CHOICE]是正确",
    "选项[CHOICE]是最合适的",
    "answer is: **[CHOICE]",
    "answer is **[CHOICE]",
    "the answer to the question is: **[CHOICE]",
    "the answer to the multiple-choice question is **[CHOICE]",
    "the answer is '[CHOICE]'",
    "[CHOICE] is the best answer",
    "the answer is [CHOICE]",
    "the correct answer is [CHOICE]",
    "would select [CHOICE]",
    "would choose [CHOICE]",
    "would select option [CHOICE]",
    "would choose option [CHOICE]",
    "is \"[CHOICE]\"",
    "is \"[CHOICE].",
    "is: **[CHOICE])",
    "is **[CHOICE],",
    "is **[CHOICE]:",
    "is **[CHOICE])",
    "is: **[CHOICE].",
    "is: **[CHOICE]:",
    "is **[CHOICE].",
    "be **[CHOICE],",
    "is: **[CHOICE]**",
    "is therefore option **[CHOICE]:",
    "is: \n\n**[CHOICE])",
    "as **[CHOICE]:",
    "be **[CHOICE])",
    "be **[CHOICE]:",
    "is: \n\n**[CHOICE]**",
    "suggests **[CHOICE])",
    "be option **[CHOICE]:",
    "with **[CHOICE])",
    "is typically \"[CHOICE])",
    "be to **[CHOICE])",
    "is: \n\n[CHOICE])",
    "is likely to be: **[CHOICE].",
    "is **[CHOICE] (",
    "is option **[CHOICE]**",
    "is likely **[CHOICE]**",
    "is:\n**[CHOICE].",
    "is:\n\n**[CHOICE].",
    "would be [CHOICE]",
    "would be option [CHOICE]",
    "would be ([CHOICE])",
    "would be option ([CHOICE])",
    "is [CHOICE],",
    "is typically [CHOICE],",
    "is typically [CHOICE].",
    "i'd say [CHOICE].",
    "option [CHOICE].",
    "option [CHOICE]:",
    "option [CHOICE],",
    "the answer is:\n**[CHOICE]",
    "is [CHOICE]:",
    "is [CHOICE].",
    "is [CHOICE],",
    "is: [CHOICE].",
    "is ([CHOICE])",
    "is:\n**[CHOICE])",
    "is likely **[CHOICE]:",
    "is the **[CHOICE])",
    ":\n[CHOICE].",
    ":\n[CHOICE])",
    ":\n[CHOICE],",
    ": \n[CHOICE].",
    ":  \n[CHOICE].",
    ":\n\n[CHOICE].",
    ":\n\n[CHOICE])",
    "is most likely **[CHOICE]:",
    ":\n\n[CHOICE],",
    ": \n\n[CHOICE].",
    "is option [CHOICE],",
    "([CHOICE]) would be",
    "is ([CHOICE]).",
    "is [CHOICE])",
    "is: [CHOICE])",
    "is:\n\n[CHOICE]:",
    "is: **[CHOICE],",
    "(option [CHOICE])",
    "answer is ([CHOICE])",
    "select option \"[CHOICE]\"",
    "is: [CHOICE]",
    "is typically **[CHOICE],",
    "is **[CHOICE]**",
    "is likely '[CHOICE]'",
    "is option '[CHOICE]'",
    "is:\n**[CHOICE]:",
    "is \\( \\boxed{[CHOICE] ",
    "would be '[CHOICE]'",
    "is the **[CHOICE]** ",
    "question is [CHOICE] (",
    "is:\n\n**[CHOICE])",
    "closest to option **[CHOICE]**",
    "is most likely **[CHOICE])",
    "the answer to the question is '[CHOICE]'",
    "question is **[CHOICE]**",
    "known as '[CHOICE]'",
    "is '[CHOICE])",
    "is typically **[CHOICE]:",
    "is \\( \\boxed{\\text{[CHOICE]}} \\)",
    "is \\( \\text{[CHOICE]) }",
    "is \\( \\text{[CHOICE]} \\)",
    "is \\( \\text{[CHOICE]:",
    "is \\( \\text{[CHOICE])",
    "is \\(\\text{[CHOICE].",
    "is:\n\n**[CHOICE]",
    "is \\( \\text{[CHOICE].}",
    "is \\( \\text{[CHOICE].",
    "is \\( \\boxed{[CHOICE]}",
    "is:\n\\[ \\boxed{\\text{[CHOICE]}}",
    "is:\n\\[ \\text{[CHOICE])",
    "is:\n\n\\[ \\text{[CHOICE])",
    "is \\( \\textbf{[CHOICE])",
    "is \\( \\text{[CHOICE]}",
    "is: \\( \\text{[CHOICE].",
    "corresponds to:\n- **[CHOICE]:",
    "would be: **[CHOICE]**.",
    "is \\( [CHOICE] \\)",
    "is:\n**[CHOICE] ",
    "corresponds to option **[CHOICE]**",
    "be **[CHOICE]**",
    "be: \n\n[CHOICE])",
    "is:\n\\[ \\boxed{[CHOICE]}",
    "is:  \n**[CHOICE]:",
    "is: \\( \\text{[CHOICE])",
    "is likely: **[CHOICE],",
    "is } \\mathbf{[CHOICE].",
    "is \\( \\boxed{[CHOICE])",
    "is \\( \\textbf{[CHOICE]}",
    "is \\([CHOICE]\\)",
    "is:\n  \n**[CHOICE]:",
    "is option **[CHOICE] ",
    "is:\n\\( \\textbf{[CHOICE].",
    "is \\( \\mathbf{[CHOICE]}",
    "was option **[CHOICE]**",
    "is likely \"[CHOICE])",
    "option **[CHOICE]:",
    "is \"[CHOICE])",
    "is most likely **[CHOICE],",
    "is often **[CHOICE]:",
    "is:  \n[CHOICE])",
    " [CHOICE].",
    " [CHOICE],",
    " [CHOICE]:",
    " [CHOICE])",
    "**[CHOICE].",
    "**[CHOICE])",
    "\"[CHOICE].",
    "\"[CHOICE],",
    "\"[CHOICE]:",
    "([CHOICE])",
    "\"[CHOICE]\"",
)
_LETTERS = "abcd"
_OPENERS = (".", ",", ":", ")")
_LAST_RESORTS = ("would be a.", 'would be "a.', "the best option from the given choices would be a scorpion (a)")


def voicebench_letter(reply: str) -> Optional[str]:
    """The option letter (A-D) VoiceBench reads from a reply, None when it reads none."""
    text = reply.lower()
    if text.startswith(("<1>", "<2>", "<3>")):
        text = text[3:].strip()
    for phrasing in PHRASINGS:
        for letter in _LETTERS:
            if phrasing.replace("[CHOICE]", letter) in text:
                return letter.upper()
    for letter in _LETTERS:
        if text == letter or text.startswith(tuple(letter + mark for mark in _OPENERS)):
            return letter.upper()
    return "A" if any(phrase in text for phrase in _LAST_RESORTS) else None


@POSTPROCESSORS.register("VoiceBenchMcqPostprocessor")
class VoiceBenchMcqPostprocessor(Postprocessor):
    """Labels are the letter VoiceBench reads (the reply kept as written); a reply it reads no letter from matches nothing."""

    def process(self, reply: str) -> str:
        return reply

    def label(self, text: str, letters: bool) -> str:
        return voicebench_letter(text) or ""
