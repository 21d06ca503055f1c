"""How much of each peer's catalog lalmeval's runspecs reproduce.

    python scripts/check_parity.py            # a table per peer, then every declaration not reproduced

A peer declaration is reproduced when a runspec entry says it `reproduces` it and, read through
lalmeval's own catalog loader (format presets applied), has the same hub repository, configuration,
split, audio column and target column, and declares every metric the peer reports the way the peer
computes it (same judge prompt, same normalizer where one is named). Undeclared peer columns are
compared with what the peer's preprocessor then reads; a declaration the peer itself cannot run
(no dataset, no reference column, a configuration that does not exist) is counted as "incomplete".
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lalmeval.catalog.runspecs import BUILTIN_DIR, JUDGE_METRICS, Catalog, Dataset  # noqa: E402
from scripts.generate_catalog import kimi_rules, lmms_rules, load_inputs  # noqa: E402
from scripts.generate_catalog import au_rules  # noqa: E402

# What AU-Harness's preprocessors read when a task names no column.
_AU_IMPLIED = {
    "GeneralPreprocessor": {"audio_column": "audio"},
    "BigBenchAudioPreprocessor": {"audio_column": "audio"},
    "VoiceBenchPreprocessor": {"audio_column": "audio"},
}


def _repo(value: str) -> str:
    return value[len("../../"):] if value.startswith("../../") else value


def _metrics_match(dataset: Dataset, peer_metrics: list[str], rules: dict, strict: bool) -> Optional[str]:
    """None when every peer metric is declared (strict: also with the peer's judge prompt and normalizer), else why not."""
    spec = dataset.spec
    for metric in peer_metrics:
        rule = rules.get(metric)
        if rule is None:
            return f"metric {metric} has no counterpart"
        if rule.get("skip"):
            continue
        if "gap" in rule or rule.get("exact") is False:
            return f"metric {metric} not reproduced"
        if not set(rule["metrics"]) <= set(spec.metrics):
            return f"metric {metric} not declared"
        if strict and rule.get("judge_template"):
            for judged in (m for m in rule["metrics"] if m in JUDGE_METRICS):
                if spec.judge_template_for(judged) != rule["judge_template"]:
                    return f"metric {metric} without judge_template {rule['judge_template']}"
        if strict and rule.get("normalizer") and spec.normalizer != rule["normalizer"]:
            return f"metric {metric} without normalizer {rule['normalizer']}"
    return None


def _compare(dataset: Dataset, facts: dict[str, Any]) -> Optional[str]:
    spec = dataset.spec
    got = {"hf_repo": _repo(spec.hf_repo), "subset": spec.subset, "split": spec.split,
           "audio_column": spec.audio_column if spec.modality != "text" else None, "target_column": spec.target_column}
    if spec.format == "kimi":  # the layout's columns, as the loader maps them (fields given in the runspec win)
        got.update({k: v for k, v in (("audio_column", "audio_path"), ("target_column", "answer")) if k not in spec.model_fields_set})
    for key, want in facts.items():
        if key == "audio_column" and facts.get("modality") == "text":
            continue
        if key in got and want is not None and got[key] != want:
            return f"{key} {got[key]!r} ≠ {want!r}"
    return None


def _entries(catalog: Catalog) -> dict[str, Dataset]:
    found = {}
    for dataset in catalog.datasets.values():
        for tag in (dataset.spec.reproduces or "").split():
            found[tag] = dataset
    return found


def _verdict(dataset: Optional[Dataset], facts: dict, peer_metrics: list[str], rules: dict, incomplete: Optional[str]) -> tuple[str, str]:
    """reproduced (strict), same data and metric (the metric's judge prompt or normalizer not the peer's yet), differs, not shipped, incomplete."""
    if incomplete:
        return "incomplete", incomplete
    if dataset is None:
        return "not shipped", "no entry"
    why = _compare(dataset, facts) or _metrics_match(dataset, peer_metrics, rules, strict=False)
    if why is not None:
        return "differs", f"{dataset.name}: {why}"
    finer = _metrics_match(dataset, peer_metrics, rules, strict=True)
    return ("reproduced", dataset.name) if finer is None else ("same data and metric", f"{dataset.name}: {finer}")


def _au(catalog: Catalog, peers: dict, mapping: dict) -> list[tuple[str, str, str]]:
    entries, rows = _entries(catalog), []
    for task in peers["au_harness"]["tasks"]:
        c = task["config"]
        implied = _AU_IMPLIED.get(c.get("preprocessor"), {})
        facts = {"hf_repo": c.get("dataset_path"), "subset": c.get("subset"), "split": c.get("split"), "modality": c.get("modality"),
                 "audio_column": c.get("audio_column") or implied.get("audio_column"), "target_column": c.get("target_column")}
        incomplete = None
        if not c.get("dataset_path"):
            incomplete = "names no dataset_path"
        elif c.get("preprocessor") == "GeneralPreprocessor" and not c.get("target_column"):
            incomplete = "names no target_column, which its GeneralPreprocessor requires"
        elif c.get("preprocessor") == "CallhomePreprocessor":
            facts = {"hf_repo": c.get("dataset_path")}
        elif c.get("preprocessor") == "BfclPreprocessor":  # it reads the row's functions beside the ground truth
            facts["target_column"] = [c.get("target_column"), "tools"]
        verdict = _verdict(entries.get(f"au_harness:{task['name']}"), facts, c.get("metrics") or [], au_rules(task["name"], mapping), incomplete)
        rows.append((task["name"], *verdict))
    return rows


def _lmms_facts(task: dict) -> dict:
    c, fns = task["config"], task["functions"]
    kwargs = (c.get("lmms_eval_specific_kwargs") or {}).get("default") or {}
    audio_fn = fns.get("doc_to_audio") or fns.get("doc_to_visual") or {}
    target = kwargs.get("target_text_column") or kwargs.get("text_column")
    if target is None and isinstance(c.get("doc_to_target"), str) and not c["doc_to_target"].startswith("!function") and c["doc_to_target"] != "target_text":
        target = c["doc_to_target"]  # VoiceBench's "target_text" is a field its own loader builds, not a column
    if kwargs.get("kwargs_column"):  # VoiceBench ifeval: the instructions and their arguments
        target = [kwargs.get("id_column", "instruction_id_list"), kwargs["kwargs_column"]]
    return {"hf_repo": c.get("dataset_path"), "subset": c.get("dataset_name"), "split": c.get("test_split") or c.get("validation_split"),
            "audio_column": kwargs.get("audio_column") or (audio_fn.get("columns") or [None])[0], "target_column": target}


def _lmms(catalog: Catalog, peers: dict, mapping: dict, revision: str, peer: str) -> list[tuple[str, str, str]]:
    entries, rows = _entries(catalog), []
    for task in peers["lmms_eval"]["revisions"][revision]["tasks"]:
        metrics = [m.get("metric") if isinstance(m, dict) else m for m in task["config"].get("metric_list") or []]
        rules = lmms_rules(task["name"], mapping)
        skipped = mapping["lmms_skip"].get(task["name"])
        dataset = entries.get(f"{peer}:{task['name']}")
        verdict = ("not shipped", skipped) if skipped else _verdict(dataset, _lmms_facts(task), metrics, rules, None)
        rows.append((task["name"], *verdict))
    return rows


def _kimi(catalog: Catalog, peers: dict, mapping: dict) -> list[tuple[str, str, str]]:
    entries, rows = _entries(catalog), []
    for dataset in peers["kimi"]["datasets"]:
        name, kind = dataset["name"], dataset["kind"]
        facts = {"hf_repo": f"private_datasets/kimi/{dataset['series']}/{name}.jsonl", "audio_column": "audio_path", "target_column": "answer"}
        subsets = mapping.get("kimi_subsets", {}).get(name)
        if subsets:  # judged subset by subset: reproduced when every subset's entry is
            verdicts = [_verdict(entries.get(f"kimi:{name}/{s}"), facts, [kind], {kind: rule}, None) for s, rule in subsets.items()]
            verdict = next((v for v in verdicts if v[0] != "reproduced"), ("reproduced", ", ".join(v[1] for v in verdicts)))
        else:
            verdict = _verdict(entries.get(f"kimi:{name}"), facts, [kind], kimi_rules(name, mapping), None)
        if verdict[0] == "reproduced" and name in ("advbench", "ifeval"):
            verdict = ("differs", f"{verdict[1]}: its published numbers come from another method (see the entry's origin)")
        rows.append((name, *verdict))
    return rows


# Scoring parity: the (peer, metric) families whose numbers tests compare with numbers computed by the peer's own
# code (run outside this repository; only the numbers are in the fixtures), and for error rates the normalizers
# those fixtures cover. An entry counts as printing what its peer prints only when every metric it declares is
# such a family: a declaration alone (same data, metric name and prompt) proves nothing about the number.
PROTOCOL_FIXTURE = ROOT / "tests" / "data" / "protocols" / "expected.json"
PEER_FIXTURES = ROOT / "tests" / "fixtures" / "peer_scores"


def scoring_checks(root: Path = ROOT) -> dict[tuple[str, str], set[Optional[str]]]:
    """(protocol, metric) → the normalizers checked against the peer's code (None: the metric has no normalizer)."""
    import json

    checks: dict[tuple[str, str], set[Optional[str]]] = {}
    conventions = json.loads((root / PROTOCOL_FIXTURE.relative_to(ROOT)).read_text())["conventions"]
    for protocol, convention in conventions.items():
        normalizers = convention.get("normalizers") or {}
        checks[(protocol, "word_error_rate")] = set(normalizers.values()) or {protocol}
    for path in sorted((root / PEER_FIXTURES.relative_to(ROOT)).glob("*.json")):
        fixture = json.loads(path.read_text(encoding="utf-8"))
        if "checks" in fixture:  # a fixture of a step (answer parsing) names the scores it checks
            for check in fixture["checks"]:
                variant = check.get("answer_extraction") or check.get("postprocessor") or check.get("judge_template")
                checks.setdefault((check["protocol"], check["metric"]), set()).add(variant)
            continue
        for case in fixture.get(path.stem) if isinstance(fixture.get(path.stem), list) else [fixture]:
            checks.setdefault((case["protocol"], path.stem), set()).add(case.get("normalizer"))
    return checks


def _variant(dataset: Dataset, metric: str) -> Optional[str]:
    """What must match the checked fixture besides protocol and metric: the normalizer of an error rate, the answer
    parsing of multiple choice (None for a metric scored one way)."""
    if metric == "word_error_rate":
        return dataset.spec.normalizer
    if metric == "accuracy" and dataset.spec.answer_extraction != "default":
        return dataset.spec.answer_extraction
    if metric == "accuracy" and dataset.spec.postprocessor != "GeneralPostprocessor":
        return dataset.spec.postprocessor
    if metric in JUDGE_METRICS:
        return dataset.spec.judge_template_for(metric)
    return None


def scoring_verdict(dataset: Optional[Dataset], checks: dict[tuple[str, str], set[Optional[str]]]) -> Optional[str]:
    """None when every metric of the entry is checked against its peer's code under the entry's protocol, else why not."""
    if dataset is None:
        return "no entry"
    protocol = dataset.spec.protocol.partition("@")[0]
    for metric in dataset.spec.metrics:
        checked = checks.get((protocol, metric))
        if checked is None:
            return f"{metric} under {protocol}: no check against the peer's code"
        variant = _variant(dataset, metric)
        if variant not in checked:
            kind = "normalizer" if metric == "word_error_rate" else "judge template" if metric in JUDGE_METRICS else "answer parsing"
            return f"{metric} with {kind} {variant}: no check against the peer's code"
    return None


def scoring(catalog: Optional[Catalog] = None, root: Path = ROOT) -> dict[str, list[tuple[str, bool, str]]]:
    """Per peer, for every declaration reproduced by declaration: (declaration, scoring checked, why not)."""
    catalog = catalog or Catalog.load([BUILTIN_DIR])
    entries, checks, out = _entries(catalog), scoring_checks(root), {}
    for peer, found in parity(catalog, root).items():
        rows = []
        for name, verdict, _ in found:
            if verdict != "reproduced":
                continue
            why = scoring_verdict(entries.get(f"{peer}:{name}"), checks)
            rows.append((name, why is None, why or ""))
        out[peer] = rows
    return out


def scoring_summary(declared: dict[str, list[tuple[str, str, str]]], scored: dict[str, list[tuple[str, bool, str]]]) -> list[list[str]]:
    """One row per peer: declarations, those reproduced by declaration, those whose scoring is checked, and the shares."""
    out = []
    for peer, found in declared.items():
        n = len(found) or 1
        reproduced = scored.get(peer, [])
        checked = sum(ok for _, ok, _ in reproduced)
        out.append([LABELS[peer], str(len(found)), str(len(reproduced)), str(checked), f"{100.0 * len(reproduced) / n:.1f} %",
                    f"{100.0 * checked / n:.1f} %"])
    return out


SCORING_HEADER = ["peer", "declarations", "declaration parity", "scoring parity", "declared %", "scored %"]


def parity(catalog: Optional[Catalog] = None, root: Path = ROOT) -> dict[str, list[tuple[str, str, str]]]:
    """Per peer: (declaration, verdict, detail) for every declaration."""
    mapping, _, peers = load_inputs(root)
    catalog = catalog or Catalog.load([BUILTIN_DIR])
    return {"au_harness": _au(catalog, peers, mapping), "lmms_v0.3": _lmms(catalog, peers, mapping, "v0.3", "lmms_v0.3"),
            "lmms": _lmms(catalog, peers, mapping, "main", "lmms"), "kimi": _kimi(catalog, peers, mapping)}


LABELS = {"au_harness": "AU-Harness", "lmms_v0.3": "lmms-eval v0.3.0", "lmms": "lmms-eval main", "kimi": "Kimi-Audio-Evalkit"}
VERDICTS = ("reproduced", "same data and metric", "differs", "not shipped", "incomplete")


def summary(rows: dict[str, list[tuple[str, str, str]]]) -> list[list[str]]:
    """One row per peer: declarations, each verdict's count, the share reproduced by the issue's definition
    (data and metric) and the strict share (also the peer's judge prompt and normalizer)."""
    out = []
    for peer, found in rows.items():
        counts = Counter(v for _, v, _ in found)
        n = len(found) or 1
        loose = 100.0 * (counts["reproduced"] + counts["same data and metric"]) / n
        out.append([LABELS[peer], str(len(found)), *(str(counts[v]) for v in VERDICTS), f"{loose:.1f} %", f"{100.0 * counts['reproduced'] / n:.1f} %"])
    return out


HEADER = ["peer", "declarations", *VERDICTS, "data + metric", "strict"]


def _print(header: list[str], table: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))


def main() -> int:
    catalog = Catalog.load([BUILTIN_DIR])
    rows = parity(catalog)
    print("Declaration parity (hub repository, configuration, split, columns, metric, judge prompt, normalizer):")
    _print(HEADER, summary(rows))
    scored = scoring(catalog)
    print("\nScoring parity (every metric of the entry checked against numbers from the peer's own code):")
    _print(SCORING_HEADER, scoring_summary(rows, scored))
    for peer, found in rows.items():
        for name, verdict, detail in found:
            if verdict != "reproduced":
                print(f"{peer}\t{name}\t{verdict}\t{detail}")
    for peer, found in scored.items():
        for name, ok, why in found:
            if not ok:
                print(f"{peer}\t{name}\tscoring not checked\t{why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
