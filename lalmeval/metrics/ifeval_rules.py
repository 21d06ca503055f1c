"""IFEval's verifiable instructions (Zhou et al. 2023, arXiv:2311.07911), one checker per instruction id.

Each checker takes the response and the instruction's arguments (the dataset's `kwargs` entry, None
values dropped) and says whether the response follows it, by the rules the paper publishes and its
released evaluation applies. Two differences, both for want of downloaded NLTK data: sentences are
counted with a rule-based splitter (end punctuation followed by a space, common abbreviations kept),
where the release uses NLTK's Punkt model; words for the capital-word count are NLTK's Treebank
tokens of the whole text rather than per Punkt sentence. Language detection is langdetect, seeded
(the release leaves its seed unset, so its verdicts can vary between runs).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Callable

Checker = Callable[[str, dict[str, Any]], bool]
RULES: dict[str, Checker] = {}


def rule(name: str) -> Callable[[Checker], Checker]:
    def add(fn: Checker) -> Checker:
        RULES[name] = fn
        return fn
    return add


def _compare(count: int, relation: str, target: int) -> bool:
    """IFEval's two relations: 'less than' (strictly) and 'at least'."""
    if relation == "less than":
        return count < target
    if relation == "at least":
        return count >= target
    raise ValueError(f"unknown relation {relation!r}")


def _detect(text: str) -> str | None:
    from langdetect import DetectorFactory, LangDetectException, detect

    DetectorFactory.seed = 0
    try:
        return detect(text)
    except LangDetectException:
        return None


_PLACEHOLDER = re.compile(r"\[.*?\]")
_TITLE = re.compile(r"<<[^\n]+>>")
_ABBREVIATIONS = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|vs|etc|e\.g|i\.e|U\.S|Inc|Ltd|Co|No)\.$", re.IGNORECASE)


# Only the end of the text still waiting to close a sentence decides whether an abbreviation ends it; keeping
# all of it made a looping reply of "Mr. Mr. Mr. …" quadratic.
_PENDING_TAIL = 64


def count_sentences(text: str) -> int:
    """Sentences: runs ending in . ! or ? (and a following space or the end), abbreviations and decimals not ending one."""
    pieces = re.split(r"(?<=[.!?])[\"')\]]*\s+", text.strip())
    count, pending = 0, ""
    for piece in pieces:
        pending = f"{pending} {piece}".strip()[-_PENDING_TAIL:]
        if pending and not _ABBREVIATIONS.search(pending):
            count, pending = count + 1, ""
    return count + (1 if pending else 0)


def count_words(text: str) -> int:
    return len(re.findall(r"\w+", text))


@rule("keywords:existence")
def _existence(text: str, args: dict) -> bool:
    return all(re.search(k, text, flags=re.IGNORECASE) for k in args["keywords"])


@rule("keywords:frequency")
def _frequency(text: str, args: dict) -> bool:
    return _compare(len(re.findall(args["keyword"], text, flags=re.IGNORECASE)), args["relation"], args["frequency"])


@rule("keywords:forbidden_words")
def _forbidden(text: str, args: dict) -> bool:
    return not any(re.search(r"\b" + w + r"\b", text, flags=re.IGNORECASE) for w in args["forbidden_words"])


@rule("keywords:letter_frequency")
def _letters(text: str, args: dict) -> bool:
    return _compare(Counter(text.lower())[args["letter"].lower()], args["let_relation"], args["let_frequency"])


@rule("language:response_language")
def _language(text: str, args: dict) -> bool:
    found = _detect(text)
    return found is None or found == args["language"]  # undetectable text is given the benefit of the doubt, as in the release


@rule("length_constraints:number_sentences")
def _sentences(text: str, args: dict) -> bool:
    return _compare(count_sentences(text), args["relation"], args["num_sentences"])


@rule("length_constraints:number_paragraphs")
def _paragraphs(text: str, args: dict) -> bool:
    parts = re.split(r"\s?\*\*\*\s?", text)
    count = len(parts)
    for i, part in enumerate(parts):
        if not part.strip():
            if i in (0, len(parts) - 1):
                count -= 1
            else:
                return False
    return count == args["num_paragraphs"]


@rule("length_constraints:number_words")
def _words(text: str, args: dict) -> bool:
    return _compare(count_words(text), args["relation"], args["num_words"])


@rule("length_constraints:nth_paragraph_first_word")
def _nth_first_word(text: str, args: dict) -> bool:
    parts = re.split(r"\n\n", text)
    count = sum(1 for p in parts if p.strip())
    nth = args["nth_paragraph"]
    if nth > count or not parts[nth - 1].strip():
        return False
    word = parts[nth - 1].strip().split()[0].strip().lstrip("'").lstrip('"')
    first = ""
    for letter in word:
        if letter in {".", ",", "?", "!", "'", '"'}:
            break
        first += letter.lower()
    return count == args["num_paragraphs"] and first == args["first_word"].lower()


@rule("detectable_content:number_placeholders")
def _placeholders(text: str, args: dict) -> bool:
    # No placeholder of a line starts after its last "]": searching only up to it finds the same ones, and a
    # looping reply of unclosed "[" is not scanned to the end of its line from each.
    found = sum(len(_PLACEHOLDER.findall(line, 0, line.rfind("]") + 1)) for line in text.split("\n"))
    return found >= args["num_placeholders"]


@rule("detectable_content:postscript")
def _postscript(text: str, args: dict) -> bool:
    marker = args["postscript_marker"]
    pattern = {"P.P.S": r"\s*p\.\s?p\.\s?s.*$", "P.S.": r"\s*p\.\s?s\..*$"}.get(marker, r"\s*" + marker.lower() + r".*$")
    return bool(re.findall(pattern, text.lower(), flags=re.MULTILINE))


@rule("detectable_format:number_bullet_lists")
def _bullets(text: str, args: dict) -> bool:
    stars = re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)
    dashes = re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    return len(stars) + len(dashes) == args["num_bullets"]


@rule("detectable_format:constrained_response")
def _constrained(text: str, args: dict) -> bool:
    return any(option in text.strip() for option in ("My answer is yes.", "My answer is no.", "My answer is maybe."))


@rule("detectable_format:number_highlighted_sections")
def _highlights(text: str, args: dict) -> bool:
    single = [h for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip()]
    double = [h for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h.removeprefix("**").removesuffix("**").strip()]
    return len(single) + len(double) >= args["num_highlights"]


@rule("detectable_format:multiple_sections")
def _sections(text: str, args: dict) -> bool:
    return len(re.split(r"\s?" + args["section_spliter"] + r"\s?\d+\s?", text)) - 1 >= args["num_sections"]


@rule("detectable_format:json_format")
def _json(text: str, args: dict) -> bool:
    body = text.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        body = body.removeprefix(prefix)
    try:
        json.loads(body.removesuffix("```").strip())
    except ValueError:
        return False
    return True


@rule("detectable_format:title")
def _title(text: str, args: dict) -> bool:
    titles = (t for line in text.split("\n") for t in _TITLE.findall(line, 0, line.rfind(">>") + 2))  # none ends after a line's last ">>"
    return any(t.lstrip("<").rstrip(">").strip() for t in titles)


@rule("combination:two_responses")
def _two_responses(text: str, args: dict) -> bool:
    parts = text.split("******")
    valid = []
    for i, part in enumerate(parts):
        if not part.strip():
            if i not in (0, len(parts) - 1):
                return False
        else:
            valid.append(part)
    return len(valid) == 2 and valid[0].strip() != valid[1].strip()


@rule("combination:repeat_prompt")
def _repeat(text: str, args: dict) -> bool:
    return text.strip().lower().startswith(args["prompt_to_repeat"].strip().lower())


@rule("startend:end_checker")
def _ends(text: str, args: dict) -> bool:
    return text.strip().strip('"').lower().endswith(args["end_phrase"].strip().lower())


@rule("change_case:capital_word_frequency")
def _capital_words(text: str, args: dict) -> bool:
    from nltk.tokenize import NLTKWordTokenizer

    words = NLTKWordTokenizer().tokenize(text)
    return _compare(sum(1 for w in words if w.isupper()), args["capital_relation"], args["capital_frequency"])


@rule("change_case:english_capital")
def _all_capitals(text: str, args: dict) -> bool:
    found = _detect(text)
    return True if found is None else text.isupper() and found == "en"  # undetectable: followed, as in the release


@rule("change_case:english_lowercase")
def _all_lowercase(text: str, args: dict) -> bool:
    found = _detect(text)
    return True if found is None else text.islower() and found == "en"


@rule("punctuation:no_comma")
def _no_comma(text: str, args: dict) -> bool:
    return not re.search(r",", text)


@rule("startend:quotation")
def _quoted(text: str, args: dict) -> bool:
    body = text.strip()
    return len(body) > 1 and body[0] == '"' and body[-1] == '"'


def loose_variants(response: str) -> list[str]:
    """The response, without its first and/or last line, and each of those without '*' (IFEval's loose reading)."""
    lines = response.split("\n")
    cut = ["\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return [response, response.replace("*", ""), *cut, *(c.replace("*", "") for c in cut)]


def follows(response: str, instruction: str, args: dict[str, Any], loose: bool) -> bool:
    """Whether `response` follows one instruction, strictly or by IFEval's loose reading."""
    check = RULES[instruction]
    candidates = loose_variants(response) if loose else [response]
    return any(c.strip() and check(c, args) for c in candidates)
