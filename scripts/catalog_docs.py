"""The generated sections of docs/catalog.md: parity figures and the peers' entries, family by family."""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

BEGIN = "<!-- BEGIN GENERATED: scripts/generate_catalog.py (edit catalog/, not this section) -->"
END = "<!-- END GENERATED -->"
PEER_NAMES = {"au_harness": "AU-Harness", "lmms": "lmms-eval main", "lmms_v0.3": "lmms-eval v0.3.0", "kimi": "Kimi-Audio-Evalkit"}


def _cell(value: Any) -> str:
    text = "—" if value in (None, "", []) else (", ".join(map(str, value)) if isinstance(value, list) else str(value))
    return text.replace("|", "\\|").replace("\n", " ")


def _hub(spec: dict) -> str:
    repo = spec.get("hf_repo", "")
    shown = f"`{repo[len('../../'):]}` (local)" if repo.startswith("../../") else f"`{repo}`"
    return " · ".join([shown, _cell(spec.get("subset")), _cell(spec.get("split", "test"))])


def _parity_section(files: dict[str, OrderedDict]) -> str:
    from lalmeval.catalog.runspecs import Catalog
    from scripts.check_parity import HEADER, parity, summary
    from scripts.check_parity import SCORING_HEADER, scoring, scoring_summary

    with tempfile.TemporaryDirectory() as folder:  # the catalog as generated, read through lalmeval's own loader
        for name, body in files.items():
            path = Path(folder) / f"{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            import json

            path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
        catalog = Catalog.load([Path(folder)])
        rows, scored = parity(catalog), scoring(catalog)
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join(" --- " for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in summary(rows)]
    misses = [f"- {PEER_NAMES[peer]} `{name}` — {verdict}: {_cell(detail)}" for peer, found in rows.items()
              for name, verdict, detail in found if verdict not in ("reproduced", "same data and metric")]
    return ("\n".join(lines) + "\n\nDeclarations not reproduced (the reason is the entry's or the check's):\n\n" + "\n".join(misses) + "\n\n"
            + _scoring_section(rows, scored, SCORING_HEADER, scoring_summary))


def _scoring_section(rows: dict, scored: dict, header: list[str], summarize: Any) -> str:
    """Scoring parity: the entries whose every metric is checked against numbers from the peer's own code."""
    from collections import Counter

    lines = ["### Scoring parity", "",
             "Declaration parity says an entry asks what the peer asks; it does not say the entry prints the number the peer's run "
             "prints. *scoring parity* counts the declarations reproduced above whose every metric is checked, under the entry's "
             "protocol (and normalizer), against numbers computed with the peer's own code on held-out pairs "
             "(tests/data/protocols/expected.json, tests/fixtures/peer_scores/; the tests that compare them: tests/test_protocols.py, "
             "tests/test_peer_scoring.py). An entry without such a check is not counted.", "",
             "| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in summarize(rows, scored)]
    reproduced = sum(len(found) for found in scored.values())
    checked = sum(ok for found in scored.values() for _, ok, _ in found)
    if reproduced:  # the share a sample of entries that claim a peer (reproduced by declaration) would see
        lines += ["", f"Of the {reproduced} entries that reproduce a peer's declaration, {checked} "
                      f"({100.0 * checked / reproduced:.1f} %) print what that peer prints for the same replies."]
    why = Counter(f"{PEER_NAMES[peer]}: {detail.split(':')[0]}" for peer, found in scored.items() for _, ok, detail in found if not ok)
    lines += ["", "Reproduced by declaration, scoring not yet checked against the peer's code (entries, by the metric that lacks a check):", ""]
    lines += [f"- {reason} ({count})" for reason, count in sorted(why.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines) + "\n"


def _family_tables(files: dict[str, OrderedDict], mapping: dict) -> str:
    parts = []
    for name, body in files.items():
        rows = [(entry, spec) for entry, spec in body.items() if "members" not in spec and spec.get("reproduces")]
        if not rows:
            continue
        parts.append(f"### {name} ({len(rows)} peer entries)\n")
        parts.append("| family | dataset | hub id · config · split | audio → target | metrics | reproduces (paper) |")
        parts.append("| --- | --- | --- | --- | --- | --- |")
        for entry, spec in rows:
            peer, _, task = spec["reproduces"].partition(":")
            columns = f"{_cell(spec.get('audio_column', 'audio'))} → {_cell(spec.get('target_column', 'reference'))}"
            if spec.get("format") == "kimi":
                columns = "audio_path → answer (format kimi)"
            parts.append(f"| {name.replace('/', ' / ')} | `{entry}` | {_hub(spec)} | {columns} | {_cell(spec.get('metrics'))} | "
                         f"{PEER_NAMES[peer]} `{task}` ({mapping['papers'][peer]}) |")
        parts.append("")
    return "\n".join(parts)


def _groups(files: dict[str, OrderedDict]) -> str:
    lines = ["| group | aggregation | members |", "| --- | --- | --- |"]
    for name, body in files.items():
        for group, spec in body.items():
            if "members" in spec:
                shown = ", ".join(f"`{m}`" for m in spec["members"][:6]) + (f" … ({len(spec['members'])})" if len(spec["members"]) > 6 else "")
                lines.append(f"| `{group}` | {spec['aggregation']} | {shown} |")
    return "\n".join(lines) + "\n"


def docs_text(root: Path, files: dict[str, OrderedDict], entries: list, mapping: dict) -> str:
    """docs/catalog.md with its generated section rewritten (the rest is kept as written)."""
    current = (root / "docs" / "catalog.md").read_text(encoding="utf-8")
    if BEGIN in current:
        head, rest = current.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
    else:
        head, tail = current.rstrip("\n") + "\n\n", "\n"
    body = "\n".join([
        BEGIN, "", "## Parity with the peers", "",
        "Measured by `python scripts/check_parity.py` on the runspecs as shipped (read through lalmeval's catalog loader). "
        "*data + metric* is the share of a peer's declarations an entry reproduces with the same hub repository, configuration, split, "
        "audio and target columns and metric; *strict* also asks for the peer's judge prompt (`judge_template`) and text normalizer "
        "where the peer's metric has its own. *incomplete*: the peer's own declaration cannot run (no dataset, no reference column); "
        "the entry ships the intended one, marked *corrected* in its origin.", "",
        _parity_section(files), "", "## Groups", "",
        "A group entry (`members`, `aggregation`) runs its datasets and adds a group score to `final_scores.json`, results.md, "
        "report.html and the console (see [Datasets](datasets.md)).", "",
        _groups(files), "", "## Peer entries by family", "",
        "Each entry's `origin` names the peer's file and commit and says how it departs from the declaration.", "",
        _family_tables(files, mapping), END])
    return head + body + tail
