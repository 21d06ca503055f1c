"""Multiple-choice questions: option lists, the gold answer, seeded option order and the prompt.

Options are plain texts in their dataset order; a label is the letter shown beside an option
(A, B, C, …). A permutation `perm` shows original option `perm[j]` at position j, so a shuffled
question keeps its gold answer through `remap_gold` and a chosen position maps back through
`original_index`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import numbers
import random
import re
import unicodedata
from functools import lru_cache
from typing import Any, Optional, Sequence

from lalmeval.data.cells import cell_text
from lalmeval.text import mended

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TEMPLATE_SECTION = "mc_templates"
TEMPLATE_NAME = "mc_options"

# A label in front of an option: "(A) ", "[A] ", "（A）" or "A. ", "A) ", "A: ", "A、", "A．".
_BRACKETED = r"(?<![A-Za-z0-9])([(\[（【])\s*({L})\s*([)\]）】])"
_DELIMITED = r"(?:^|(?<=[\s;,，；|]))()({L})\s*([.)．）:：、])"
_LABEL = r"(?:[(\[（【]\s*({L})\s*[)\]）】]|({L})\s*[.)．）:：、])"


def labels(n: int) -> list[str]:
    """The labels of `n` options: A, B, C, …; more than 26 is an error."""
    if not 0 <= n <= len(LETTERS):
        raise ValueError(f"multiple choice supports 0 to {len(LETTERS)} options, got {n}")
    return list(LETTERS[:n])


def _label_pattern(letter: str, style: Optional[tuple[str, str]] = None) -> re.Pattern[str]:
    """Where label `letter` starts an option; `style` (opening, closing) keeps to the first label's look."""
    if style is None:
        return re.compile(f"{_BRACKETED}|{_DELIMITED}".format(L=letter))
    opening, closing = style
    if opening:
        return re.compile(rf"(?<![A-Za-z0-9]){re.escape(opening)}\s*({letter})\s*{re.escape(closing)}")
    return re.compile(rf"(?:^|(?<=[\s;,，；|]))({letter})\s*{re.escape(closing)}")


def _split_labelled(text: str) -> Optional[list[str]]:
    """'(A) cat (B) dog' / 'A. cat\\nB. dog' / 'A) cat; B) dog' → ['cat', 'dog']; None if not so."""
    text = text.strip()
    letters = LETTERS if _label_pattern("A").match(text) else LETTERS.lower()
    first = _label_pattern(letters[0]).match(text)
    if not first:
        return None
    groups = first.groups()
    style = (groups[0], groups[2]) if groups[0] else ("", groups[5])
    starts, ends = [first.start()], [first.end()]
    # Labels come in order and in the style of the first one, so a stray "B." inside
    # "(A) Plan B. Stop (B) Go" stays part of the text.
    for letter in letters[1:]:
        found = _label_pattern(letter, style).search(text, ends[-1])
        if not found:
            break
        starts.append(found.start())
        ends.append(found.end())
    bounds = list(zip(ends, starts[1:] + [len(text)]))
    return [text[a:b].strip().rstrip(";,，；|").strip() for a, b in bounds]


def _strip_list_labels(items: list[str]) -> list[str]:
    """['A. cat', 'B. dog'] → ['cat', 'dog'] when every item carries its own label in order."""
    stripped = []
    for letter, item in zip(LETTERS, items):
        found = re.compile(r"\s*" + _LABEL.format(L=letter) + r"\s*").match(item)
        if not found or not item[found.end():].strip():
            return items
        stripped.append(item[found.end():].strip())
    return stripped


def _from_sequence(values: Sequence[Any]) -> list[str]:
    """Option texts by the cell rule of lalmeval.data.cells (3.0 is "3"); a null or NaN option is empty."""
    items = []
    for label, value in zip(LETTERS, values):
        if isinstance(value, bool) or not (isinstance(value, (str, numbers.Number)) or value is None):
            raise ValueError(f"options: each option must be a text or a number, got {type(value).__name__} {value!r}")
        items.append((cell_text(value, f"option {label}") or "").strip())
    if len(values) > len(LETTERS):
        labels(len(values))  # more than 26 options is an error
    return _strip_list_labels(items)


def _from_string(value: str) -> list[str]:
    text = value.strip()
    if text.startswith("["):
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(parsed, list):
                return _from_sequence(mended(parsed))  # an escaped lone surrogate decodes to text no request can carry
    split = _split_labelled(text)
    if split is None:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise ValueError(
            "options: expected a list (JSON or Python, e.g. [\"cat\", \"dog\"]) or labelled options "
            f"('(A) cat (B) dog', 'A. cat\\nB. dog'), got {shown!r}"
        )
    return split


def parse_options(value: Any) -> list[str]:
    """The option texts, without labels, held by a list, a list string or a labelled-options string."""
    if isinstance(value, str):
        options = _from_string(value)
    elif isinstance(value, (list, tuple)):
        options = _from_sequence(value)
    elif hasattr(value, "tolist") and isinstance(value.tolist(), list):  # numpy / pyarrow arrays
        options = _from_sequence(value.tolist())
    else:
        raise ValueError(f"options: expected a list or a string, got {type(value).__name__} {value!r}")
    if len(options) < 2:
        raise ValueError(f"options: a multiple-choice question needs at least 2 options, got {options!r}")
    if any(not option for option in options):
        raise ValueError(f"options: option {labels(len(options))[options.index('')]} is empty in {options!r}")
    labels(len(options))  # more than 26 options is an error
    return options


def normalize_text(text: str) -> str:
    """A comparable form of an option text: NFKC, case-folded, punctuation and spacing ignored."""
    text = unicodedata.normalize("NFKC", text).casefold()
    # Punctuation between digits is part of a number ("5.7", "1,000"), not a separator.
    text = re.sub(r"(?<!\d)[^\w\s]|[^\w\s](?!\d)|_", " ", text)
    return " ".join(text.split())


def _index_from_number(target: Any, n: int) -> Optional[int]:
    if isinstance(target, bool) or not isinstance(target, numbers.Real):
        return None
    if isinstance(target, numbers.Integral) or float(target).is_integer():
        index = int(target)
        if not 0 <= index < n:
            raise ValueError(f"gold answer {target!r}: index out of range for {n} options (0-based)")
        return index
    raise ValueError(f"gold answer {target!r}: a numeric gold answer must be a whole 0-based index")


def _index_from_text(target: str, options: list[str]) -> Optional[int]:
    wanted = normalize_text(target)
    hits = [i for i, option in enumerate(options) if normalize_text(option) == wanted]
    if len(hits) > 1:
        raise ValueError(f"gold answer {target!r} matches options {', '.join(LETTERS[i] for i in hits)} equally")
    return hits[0] if hits else None


def _index_from_letter(target: str, n: int) -> Optional[int]:
    found = re.fullmatch(r"[(\[（]?\s{0,8}([A-Za-z])\s{0,8}[)\]）]?\s{0,8}[.:：)]?", target)  # bounded: linear on any text
    if found and LETTERS.index(found.group(1).upper()) < n:
        return LETTERS.index(found.group(1).upper())
    return None


def _index_from_labelled(target: str, options: list[str]) -> Optional[int]:
    """'(B) dog' / 'B. dog': the label's option when its text agrees."""
    found = re.match(r"\s*" + _LABEL.format(L="[A-Za-z]"), target)
    if not found:
        return None
    index = LETTERS.index((found.group(1) or found.group(2)).upper())
    if index < len(options) and normalize_text(options[index]) == normalize_text(target[found.end():]):
        return index
    return None


def gold_index(target: Any, options: list[str]) -> int:
    """The 0-based index of the gold answer given as an index, option text, letter or '(B) text'.

    A string is tried, in order, as: an option's text (case, spacing and punctuation ignored),
    a letter ('B', '(b)', 'B.'), a 0-based index in digits ('1' → B), '(B) text' whose text is
    option B's. The option text wins first, so with options ['0', '1'] the gold '1' is option B
    because its text is '1', and with options ['3', '5'] the gold '1' is also option B (index).
    """
    index = _index_from_number(target, len(options))
    if index is not None:
        return index
    if not isinstance(target, str) or not target.strip():
        raise ValueError(f"gold answer {target!r}: expected a letter, an option text or a 0-based index")
    text = target.strip()
    for attempt in (
        lambda: _index_from_text(text, options),
        lambda: _index_from_letter(text, len(options)),
        lambda: int(text) if text.isdigit() and int(text) < len(options) else None,
        lambda: _index_from_labelled(text, options),
    ):
        index = attempt()
        if index is not None:
            return index
    last = LETTERS[len(options) - 1]
    raise ValueError(
        f"gold answer {target!r} matches no option: not an option's text, not a letter A–{last}, "
        f"not an index 0–{len(options) - 1}, not '(X) text' of an option (options: {options!r})"
    )


def _draw(rng: random.Random, n: int) -> list[int]:
    """Fisher–Yates on `random()`, whose sequence Python keeps stable across versions."""
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _stream(seed: int, sample_id: str, block: int) -> random.Random:
    key = json.dumps([int(seed), sample_id, block]).encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:16], "big"))


def permutation(seed: int, repeat: int, sample_id: str, n: int) -> list[int]:
    """The option order of one repeat of one sample: deterministic, and new for each repeat.

    Repeats 0 … n!-1 of a sample get pairwise different orders (two options: repeat 0 and 1 are
    the two orders); after n! repeats the orders start over in a fresh random sequence.
    """
    if repeat < 0:
        raise ValueError(f"repeat must be 0 or more, got {repeat}")
    labels(n)
    cycle = math.factorial(n)
    block, position = divmod(repeat, cycle)
    rng = _stream(seed, str(sample_id), block)
    seen: list[list[int]] = []
    while len(seen) <= position:
        perm = _draw(rng, n)
        if perm not in seen:
            seen.append(perm)
    return seen[position]


def _check_perm(perm: Sequence[int], n: int) -> None:
    if sorted(perm) != list(range(n)):
        raise ValueError(f"{list(perm)!r} is not a permutation of {n} options")


def apply(options: list[str], perm: Sequence[int]) -> list[str]:
    """The options in the order `perm` shows them: position j holds options[perm[j]]."""
    _check_perm(perm, len(options))
    return [options[i] for i in perm]


def remap_gold(gold: int, perm: Sequence[int]) -> int:
    """The position at which `perm` shows original option `gold`."""
    _check_perm(perm, len(perm))
    if not 0 <= gold < len(perm):
        raise ValueError(f"gold index {gold} out of range for {len(perm)} options")
    return list(perm).index(gold)


def original_index(shown: int, perm: Sequence[int]) -> int:
    """The original index of the option shown at position `shown`."""
    _check_perm(perm, len(perm))
    return perm[shown]


def format_options(options: list[str]) -> str:
    """'A. cat\\nB. dog': one labelled option a line."""
    return "\n".join(f"{label}. {text}" for label, text in zip(labels(len(options)), options))


@lru_cache(maxsize=1)
def default_template() -> str:
    """The shipped `mc_templates.mc_options` template from prompts.yaml."""
    from lalmeval.config.prompts import load_prompts

    return load_prompts()[TEMPLATE_SECTION][TEMPLATE_NAME]


def format_prompt(question: str, options: list[str], template: Optional[str] = None) -> str:
    """The question with its labelled options filled into `template` (default: mc_options).

    The template's {question}, {options} and {labels} ("A, B, C, D") are replaced; other braces
    are left alone, so a template may ask for \\boxed{} answers. `<image k>` placeholders in the
    question or options stay as they are.
    """
    template = default_template() if template is None else template
    missing = [key for key in ("{question}", "{options}") if key not in template]
    if missing:
        raise ValueError(f"multiple-choice template lacks {' and '.join(missing)}: {template!r}")
    fills = {"{question}": question.strip(), "{options}": format_options(options), "{labels}": ", ".join(labels(len(options)))}
    return re.sub(r"\{question\}|\{options\}|\{labels\}", lambda m: fills[m.group(0)], template)
