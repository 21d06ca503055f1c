"""Write runspecs/**/*.json (and docs/catalog.md's generated sections) from catalog/.

    python scripts/generate_catalog.py          # write
    python scripts/generate_catalog.py --check  # exit 1 when a committed file differs

Inputs: catalog/lalmeval.json (lalmeval's own entries, file → name → settings), catalog/peers/*.json
(the peers' declarations as facts, from scripts/extract_peers.py) and catalog/mapping.yaml (how a
peer's declaration becomes an entry). Every AU-Harness task, lmms-eval audio task (v0.3.0 and main)
and Kimi-Audio-Evalkit dataset becomes an entry, named by who declares it: lalmeval's own entries keep
their names; a peer's task takes its own name when nobody earlier (lalmeval, AU-Harness, lmms-eval
main, lmms-eval v0.3, Kimi) holds it, else `<name>@<peer>`. Kimi's are always `<name>@kimi`; a Kimi dataset
judged subset by subset (catalog/mapping.yaml kimi_subsets) is one entry per subset, `<name>-<subset>@kimi`.
Peer groups become group entries `<group>@<peer>` in runspecs/groups/<peer>.json.

Fields another part of lalmeval owns (protocol, judge_template, a normalizer) are written only when
the schema and registries in this checkout accept them, so the output always validates.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lalmeval.judging import templates as judge_templates  # noqa: E402
from lalmeval.config.languages import NAMES  # noqa: E402
from lalmeval.metrics import METRICS, NORMALIZERS  # noqa: E402
from lalmeval.catalog.runspecs import JUDGE_METRICS, DatasetSpec  # noqa: E402

ORDER = ("au_harness", "lmms", "lmms_v0.3", "kimi")  # who takes a free plain name first
LANGUAGE_NAMES = {code: name.capitalize() for name, code in NAMES.items() if name not in ("mandarin", "myanmar", "filipino", "multilingual")}
LANGUAGE_NAMES.update({"zh": "Chinese", "sv": "Swedish", "ja": "Japanese", "cy": "Welsh"})


@dataclass
class Entry:
    """One runspec entry to write."""

    name: str           # the peer's own name (before the naming rule)
    peer: str
    file: str           # category/stem
    spec: dict[str, Any]
    gaps: list[str] = field(default_factory=list)      # peer metrics lalmeval cannot reproduce, with why
    differs: list[str] = field(default_factory=list)   # how the entry departs from the declaration, with why
    judges: dict[str, str] = field(default_factory=dict)  # judge metric → the peer's template for it
    final: str = ""


def load_inputs(root: Path = ROOT) -> tuple[dict, dict, dict]:
    mapping = yaml.safe_load((root / "catalog" / "mapping.yaml").read_text(encoding="utf-8"))
    ours = json.loads((root / "catalog" / "lalmeval.json").read_text(encoding="utf-8"), object_pairs_hook=OrderedDict)
    peers = {name: json.loads((root / "catalog" / "peers" / f"{name}.json").read_text(encoding="utf-8"))
             for name in ("au_harness", "lmms_eval", "kimi")}
    return mapping, ours, peers


# ---------------------------------------------------------------- what the schema accepts

def _accepts(field_name: str, value: Any) -> bool:
    """Whether a runspec in this checkout takes `field_name: value` (another owner's field may not be here yet)."""
    if field_name not in DatasetSpec.model_fields:
        return False
    try:
        DatasetSpec.model_validate({"hf_repo": "x", "language": "en", field_name: value})
    except Exception:  # noqa: BLE001 - any refusal means: not yet
        return False
    if field_name == "judge_template":
        return value in judge_templates.names()
    return True


def _origin(spec: dict, declared: str, paper: str) -> str:
    """Where the data is, where the declaration is, and the paper."""
    repo = spec["hf_repo"]
    data = f"data: {repo[len('../../'):]} (local)" if repo.startswith("../../") else f"https://huggingface.co/datasets/{repo}"
    return f"{data} | declared in {declared} | paper: {paper}"


def _apply_metric(entry: Entry, peer_metric: str, rule: dict) -> None:
    """Add what lalmeval declares for one of the peer's metrics (or record the gap)."""
    if rule.get("skip"):
        return
    if "gap" in rule:
        entry.gaps.append(f"{peer_metric}: {rule['gap']}")
        return
    missing = [m for m in rule["metrics"] if m not in METRICS.names()]
    if missing:
        entry.gaps.append(f"{peer_metric}: lalmeval has no metric {', '.join(missing)}")
        return
    for metric in rule["metrics"]:
        if metric not in entry.spec.setdefault("metrics", []):
            entry.spec["metrics"].append(metric)
    if rule.get("exact") is False:
        entry.differs.append(f"metric {peer_metric}: {rule.get('note') or 'scored with ' + ', '.join(rule['metrics']) + ' instead'}")
    template = rule.get("judge_template")
    if template and not _accepts("judge_template", template):  # the peer's judge is not shipped (yet): a stand-in, said so
        stand_in = rule.get("stand_in")
        entry.differs.append(f"metric {peer_metric}: " + (rule.get("note") or f"the peer's judge prompt ({template}) is not available here; "
                                                          + (f"{stand_in} stands in" if stand_in else "lalmeval's default prompt is used")))
        template = stand_in
    if template:
        for metric in (m for m in rule["metrics"] if m in JUDGE_METRICS):
            if entry.judges.setdefault(metric, template) != template:
                raise SystemExit(f"catalog/mapping.yaml: {entry.peer} {entry.name}: {metric} would need two templates, {entry.judges[metric]} and {template}")
    normalizer = rule.get("normalizer")
    if normalizer:
        if normalizer in NORMALIZERS.names():
            entry.spec["normalizer"] = normalizer
        else:
            entry.differs.append(f"metric {peer_metric}: the peer's text normalization ({normalizer}) is not available here; the language's default is used")
    if rule.get("error_unit"):
        entry.spec["error_unit"] = rule["error_unit"]


def _judge_templates(entry: Entry) -> None:
    """Write the entry's judge templates: one name when it has one judge metric, else one per metric."""
    judged = [m for m in entry.spec.get("metrics", []) if m in JUDGE_METRICS]
    found = {m: t for m, t in entry.judges.items() if m in judged and _accepts("judge_template", t)}
    if not found:
        return
    entry.spec["judge_template"] = next(iter(found.values())) if len(judged) == 1 else found


def _protocol(entry: Entry, name: str) -> None:
    if _accepts("protocol", name):
        entry.spec["protocol"] = name


def _language(code: Optional[str]) -> str:
    if not code:
        return "en"
    code = str(code)
    if code.lower() == "english":
        return "english"
    if "/" in code:  # AU-Harness's code-switching "en/zh": Mandarin with English words, counted as mixed units
        return "zh"
    return code


def _generation(settings: dict) -> dict:
    out = {}
    for key, value in (settings or {}).items():
        if key == "temperature":
            out["temperature"] = float(value)
        elif key in ("max_completion_tokens", "max_new_tokens", "max_gen_tokens"):
            out["max_tokens"] = int(value)
        elif key == "top_p" and value:
            out["top_p"] = float(value)
    if "temperature" not in out and settings and settings.get("do_sample") is False:
        out["temperature"] = 0.0
    return out


def _file_for(path: str, table: dict[str, str]) -> str:
    best = max((k for k in table if path == k or path.startswith(k + "/")), key=len, default=None)
    if best is None:
        raise SystemExit(f"catalog/mapping.yaml: no file for {path}")
    return table[best]


# ---------------------------------------------------------------- AU-Harness

_AU_CALLHOME = {"deu": "deu", "eng": "eng", "jpn": "jpn", "spa": "spa", "zho": "zho"}


def au_entry(task: dict, mapping: dict, commit: str) -> Optional[Entry]:
    c = dict(task["config"])
    name = task["name"]
    folder = "/".join(task["groups"])
    entry = Entry(name, "au_harness", _file_for(folder, mapping["au_harness_files"]), OrderedDict())
    spec = entry.spec
    pre = c.get("preprocessor")
    modality = c.get("modality", "audio")
    repo, subset, audio, target = _au_corrected(entry, c)
    if pre == "CallhomePreprocessor":
        lang = name.rsplit("_", 1)[1]
        spec.update(hf_repo=f"../../private_datasets/callhome/{_AU_CALLHOME[lang]}", format="callhome", segment="turns")
        entry.differs.append("data: AU-Harness reads a save_to_disk folder its own script builds from CallHome "
                             f"({repo}, split {c.get('split')}); lalmeval reads the TalkBank transcripts and calls themselves (format callhome) in turn windows")
    else:
        spec["hf_repo"] = repo
        if subset is not None:
            spec["subset"] = subset
        spec["split"] = c.get("split", "test")
    language = _language(c.get("language") or c.get("source_language"))
    spec["language"] = language
    if c.get("target_language") and pre == "Covost2Preprocessor":
        spec["target_language"] = c["target_language"]
    if modality != "audio":
        spec["modality"] = modality
    if pre != "CallhomePreprocessor":
        _au_columns(entry, c, pre, modality, audio, target)
    if c.get("choices_column"):
        spec["choices_column"] = c["choices_column"]
    if c.get("accented"):
        spec["accented"] = True
    if c.get("long_audio_processing_logic") in ("chunk", "truncate"):
        spec["long_audio"] = c["long_audio_processing_logic"]
    gen = _generation(c.get("generation_kwargs"))
    if gen:
        spec["generation_kwargs"] = gen
    if pre == "MultiturnPreprocessor":
        entry.differs.append("generation: AU-Harness replaces the temperature by a fixed one per MT-Bench category (writing and roleplay 0.7, stem and humanities 0.1, the rest 0)")
    template = _au_prompt(c, pre, language)
    if template:
        spec["prompt_template"] = template
    if "prompt" in c and "user_prompt" not in c:
        entry.differs.append("prompt: the declaration's 'prompt' key is not read by AU-Harness (it reads user_prompt), so the dataset's own instruction is the whole prompt, as here")
    rules = au_rules(name, mapping)
    for metric in c.get("metrics") or [] if not entry.gaps else []:
        _apply_metric(entry, metric, rules.get(metric, {"gap": "no mapping"}))
    _judge_templates(entry)
    _protocol(entry, "au_harness")
    spec["reproduces"] = f"au_harness:{name}"
    spec["origin"] = _origin(spec, f"AU-Harness {task['file']} @ {commit[:12]}", mapping["papers"]["au_harness"])
    return entry


def au_rules(name: str, mapping: dict) -> dict:
    """AU-Harness's metric rules for one task: the common ones, with the task's own overrides (au_metric_overrides)."""
    own = next((o for prefix, o in mapping.get("au_metric_overrides", {}).items() if name.startswith(prefix)), {})
    return {**mapping["metrics"]["au_harness"], **own}


def _au_corrected(entry: Entry, c: dict) -> tuple[Optional[str], Optional[str], Optional[str], Any]:
    """Repository, configuration, audio and target columns — the intended ones where the declaration cannot run as written."""
    name = entry.name
    repo, subset, audio, target = c.get("dataset_path"), c.get("subset"), c.get("audio_column"), c.get("target_column")
    if repo is None and name.startswith("gigaspeech2_"):
        repo, audio, target = "AudioLLMs/gigaspeech2-test", "context", "answer"
        entry.differs.append("corrected: the task extends the ASR base instead of gigaspeech2/base.yaml, so it names no dataset_path; "
                             "AudioLLMs/gigaspeech2-test (context → answer) is the one its siblings read")
        c.setdefault("instruction_column", "instruction")
    if name.startswith("librispeech_multilingual_") or name == "spgispeech_test":
        audio, target = audio or "audio", target or "transcript"
        entry.differs.append("corrected: the declaration names no target_column, which AU-Harness's GeneralPreprocessor requires; "
                             "the dataset's transcript column is the reference")
        if subset == "nl":
            subset = "dutch"
            entry.differs.append("corrected: config 'nl' does not exist in facebook/multilingual_librispeech, whose configs are language names (dutch)")
    return repo, subset, audio, target


def _au_columns(entry: Entry, c: dict, pre: str, modality: str, audio: Optional[str], target: Optional[str]) -> None:
    spec = entry.spec
    instruction_col = c.get("instruction_column")
    text_col = c.get("textual_input_column")
    if pre == "VoiceBenchPreprocessor":
        text_col, instruction_col = "prompt", None
        if c.get("subset") == "ifeval":
            target = ["instruction_id_list", "kwargs"]
    if pre == "BigBenchAudioPreprocessor":  # its judge is shown the (transcript, official answer) pair
        audio, text_col, instruction_col = "audio", "transcript", None
        spec["transcript_column"] = "transcript"
    if pre == "BfclPreprocessor":
        instruction_col, text_col = "tools", "question"
        target = [target, "tools"]
        spec["preprocessor"], spec["postprocessor"] = "BfclPreprocessor", "BfclPostprocessor"
        if not c.get("user_prompt"):
            entry.gaps.append("bfcl_match_score: this variant sends the functions as the request's tools and reads the reply's tool_calls; lalmeval sends no tools")
    if pre == "MultiturnPreprocessor":
        spec["turns_column"], text_col = text_col, None
        spec["id_column"] = c.get("id_column")
    if pre == "SpokenWozPreprocessor":
        text_col = c.get("context_column")
        spec["modality"] = "audio_text" if modality == "audio" else "text"
    if pre == "Covost2Preprocessor":
        spec["transcript_column"] = "sentence"
    if modality != "text":
        spec["audio_column"] = audio or "audio"
    else:
        spec["audio_column"] = None
    spec["target_column"] = target
    if instruction_col:
        spec["additional_instruction_column"] = instruction_col
    if text_col and (modality != "audio" or pre == "SpokenWozPreprocessor"):
        spec["textual_input_column"] = text_col
    if pre == "BfclPreprocessor" and modality == "audio":
        spec.pop("textual_input_column", None)
    if c.get("id_column") and "id_column" not in spec:
        spec["id_column"] = c["id_column"]


def _au_prompt(c: dict, pre: str, language: str) -> Optional[str]:
    prompt = c.get("user_prompt")
    if not prompt:
        return None
    if pre == "Covost2Preprocessor":
        source = LANGUAGE_NAMES.get(str(c.get("source_language", "")).split("-")[0], c.get("source_language"))
        target = LANGUAGE_NAMES.get(str(c.get("target_language", "")).split("-")[0], c.get("target_language"))
        prompt = prompt.replace("{{source_language_name}}", str(source)).replace("{{target_language_name}}", str(target))
    if pre == "BfclPreprocessor":
        return prompt + "Here is a list of functions in JSON format that you can invoke.\n{instruction}\n"
    if c.get("instruction_column") and pre == "GeneralPreprocessor":
        return prompt + "{instruction}"
    return prompt


# ---------------------------------------------------------------- lmms-eval

def _pattern_value(table: dict[str, Any], name: str) -> Any:
    for pattern, value in table.items():
        if fnmatch.fnmatchcase(name, pattern):
            return value
    return None


def lmms_entry(task: dict, mapping: dict, peer: str, commit: str) -> Optional[Entry]:
    name, c, fns = task["name"], task["config"], task["functions"]
    folder = task["file"].split("/")[2]
    entry = Entry(name, peer, mapping["lmms_files"][folder], OrderedDict())
    spec = entry.spec
    kwargs = (c.get("lmms_eval_specific_kwargs") or {}).get("default") or {}
    spec["hf_repo"] = c.get("dataset_path")
    if c.get("dataset_name"):
        spec["subset"] = c["dataset_name"]
    spec["split"] = c.get("test_split") or c.get("validation_split") or "test"
    language = _pattern_value(mapping["lmms_languages"], name)
    if language == "{suffix}":
        language = name.split("_")[1]
    spec["language"] = language
    if name.startswith("covost2_en_zh"):
        spec["target_language"] = "zh"
    audio_fn = fns.get("doc_to_audio") or fns.get("doc_to_visual") or {}
    spec["audio_column"] = kwargs.get("audio_column") or (audio_fn.get("columns") or ["audio"])[0]
    target = kwargs.get("target_text_column") or kwargs.get("text_column")
    if target is None and isinstance(c.get("doc_to_target"), str) and not c["doc_to_target"].startswith("!function") and c["doc_to_target"] != "target_text":
        target = c["doc_to_target"]  # VoiceBench's "target_text" is a field its own loader builds, not a column
    if kwargs.get("kwargs_column"):  # VoiceBench ifeval: the instructions and their arguments
        target = [kwargs.get("id_column", "instruction_id_list"), kwargs["kwargs_column"]]
    if target is None and fns.get("doc_to_target"):
        target = (fns["doc_to_target"].get("columns") or [None])[0]
    spec["target_column"] = target
    overrides = _pattern_value(mapping["lmms_tasks"], name) or {}
    spec.update(overrides)
    if "ifeval" in name:
        spec["target_column"] = ["instruction_id_list", "kwargs"]
    _lmms_prompt(spec, kwargs, fns, overrides)
    gen = _generation(c.get("generation_kwargs"))
    if gen:
        spec["generation_kwargs"] = gen
    rules = lmms_rules(name, mapping)
    for metric in c.get("metric_list") or []:
        metric_name = metric.get("metric") if isinstance(metric, dict) else metric
        _apply_metric(entry, metric_name, rules.get(metric_name, {"gap": f"lmms-eval's {metric_name} has no counterpart"}))
    _judge_templates(entry)
    _protocol(entry, peer)  # lmms or lmms_v0.3: the release whose scoring the entry reproduces
    if "word_error_rate" in spec.get("metrics", []) and spec.get("language") == "en":
        _lmms_english(spec, name, peer)
    spec["reproduces"] = f"{peer}:{name}"
    spec["origin"] = _origin(spec, f"lmms-eval {task['file']} @ {commit[:12]}", mapping["papers"][peer])
    return entry


def _lmms_english(spec: dict, name: str, peer: str) -> None:
    """English ASR: gigaspeech applies the English normalizer alone, lmms-eval's other tasks add the basic one."""
    wanted = "lmms_english_only" if name.startswith("gigaspeech") else "lmms"
    default = "lmms_english_only" if peer == "lmms_v0.3" else "lmms"
    if wanted != default and _accepts("normalizer", wanted):
        spec["normalizer"] = wanted


def lmms_rules(name: str, mapping: dict) -> dict:
    """lmms-eval's metric rules for one task: the common ones, with the task's own gpt_eval and overrides."""
    rules = dict(mapping["metrics"]["lmms"])
    for prefix, judge in mapping["lmms_gpt_eval"].items():
        if name.startswith(prefix):
            rules["gpt_eval"] = {**rules["gpt_eval"], **judge}
    for prefix, overrides in mapping.get("lmms_metric_overrides", {}).items():
        if name.startswith(prefix):
            rules.update(overrides)
    return rules


def _lmms_prompt(spec: dict, kwargs: dict, fns: dict, overrides: dict) -> None:
    pre, post = kwargs.get("pre_prompt") or "", kwargs.get("post_prompt") or ""
    text_fn = fns.get("doc_to_text") or {}
    fixed = [s for s in text_fn.get("strings", []) if len(s) > 20 and " " in s and not s.startswith("{")]
    if "prompt_template" in overrides:  # the task's doc_to_text frames it its own way (mapping.yaml lmms_tasks)
        return
    if spec.get("additional_instruction_column"):
        template = f"{pre}{{instruction}}{post}"
        if template != "{instruction}":
            spec["prompt_template"] = template
    elif fixed or pre or post:
        spec["instruction"] = f"{pre}{fixed[0] if fixed else ''}{post}".strip() or None
        if spec["instruction"] is None:
            del spec["instruction"]


# ---------------------------------------------------------------- Kimi-Audio-Evalkit

def kimi_rules(name: str, mapping: dict) -> dict:
    """Kimi-Audio-Evalkit's metric rules for one dataset: by kind, with the dataset's own judge where it has one."""
    return {**mapping["metrics"]["kimi"], **mapping.get("kimi_metric_overrides", {}).get(name, {})}


def kimi_entries(dataset: dict, mapping: dict, commit: str) -> list[Entry]:
    """The dataset's entry — or, where its evaluate() judges each subset its own way, one entry per subset."""
    subsets = mapping.get("kimi_subsets", {}).get(dataset["name"])
    if not subsets:
        return [kimi_entry(dataset, mapping, commit)]
    return [kimi_entry(dataset, mapping, commit, subset, rule) for subset, rule in subsets.items()]


def kimi_entry(dataset: dict, mapping: dict, commit: str, subset: Optional[str] = None, rule: Optional[dict] = None) -> Entry:
    name = dataset["name"]
    entry = Entry(f"{name}-{subset}" if subset else name, "kimi", mapping["kimi_files"][name], OrderedDict())
    spec = entry.spec
    spec["hf_repo"] = f"../../private_datasets/kimi/{dataset['series']}/{name}.jsonl"
    spec["format"] = "kimi"
    language = dataset.get("language") or ("zh" if name in ("AISHELL-1", "AISHELL-2", "WenetSpeech", "Fleurs-zh") else "en")
    spec["language"] = language
    spec["subset_column"] = "subset"
    if subset:
        spec["keep_subsets"] = [subset]
    _apply_metric(entry, dataset["kind"], rule or kimi_rules(name, mapping)[dataset["kind"]])
    _judge_templates(entry)
    if name in ("advbench", "ifeval"):
        entry.differs.append("Kimi-Audio-Evalkit's default method for this set is the 1-5 open-answer judge; its vb-advbench / vb-ifeval methods (refusal keywords, IFEval rules) are the published ones")
    _protocol(entry, "kimi")
    source = dataset.get("downloader") or {}
    hub = ", ".join(a[0] for a in source.get("load_dataset", []) if a)
    spec["reproduces"] = f"kimi:{name}/{subset}" if subset else f"kimi:{name}"
    spec["origin"] = _origin(spec, f"Kimi-Audio-Evalkit {dataset['file']} (class {dataset['class']}) @ {commit[:12]}; the jsonl is written by its "
                             f"data/download_benchmark.py ({source.get('class')}{'; from the hub: ' + hub if hub else ''}) run with --output-dir private_datasets/kimi"
                             + (f"; subset {subset} of it, which its evaluate() judges with its own prompt" if subset else ""),
                             mapping["papers"]["kimi"])
    return entry


# ---------------------------------------------------------------- naming, groups, output

def build(root: Path = ROOT) -> tuple[dict[str, OrderedDict], list[Entry], dict]:
    """file → entries to write; the peer entries (with final names); group entries per peer file."""
    mapping, ours, peers = load_inputs(root)
    au, lmms, kimi = peers["au_harness"], peers["lmms_eval"], peers["kimi"]
    entries: list[Entry] = [e for t in au["tasks"] if (e := au_entry(t, mapping, au["commit"]))]
    main = {t["name"]: t for t in lmms["revisions"]["main"]["tasks"]}
    old = {t["name"]: t for t in lmms["revisions"]["v0.3"]["tasks"]}
    for name, task in main.items():
        if name not in mapping["lmms_skip"]:
            entries.append(lmms_entry(task, mapping, "lmms", lmms["revisions"]["main"]["commit"]))
    for name, task in old.items():
        if name in mapping["lmms_skip"]:
            continue
        entries.append(lmms_entry(task, mapping, "lmms_v0.3", lmms["revisions"]["v0.3"]["commit"]))
    entries += [e for d in kimi["datasets"] for e in kimi_entries(d, mapping, kimi["commit"])]
    taken = {name for file in ours.values() for name in file}
    for peer in ORDER:
        for entry in (e for e in entries if e.peer == peer):
            plain = entry.name if peer != "kimi" else None
            entry.final = plain if plain and plain not in taken else f"{entry.name}@{peer}"
            if entry.final in taken:
                raise SystemExit(f"two entries named {entry.final}")
            taken.add(entry.final)
    files: dict[str, OrderedDict] = OrderedDict((k, OrderedDict(v)) for k, v in ours.items())
    for entry in entries:
        spec = OrderedDict((k, v) for k, v in entry.spec.items() if v is not None or k in ("audio_column", "target_column"))
        if not spec.get("metrics"):
            if not entry.gaps:
                entry.gaps.append("the peer reports no score for this task (a submission file for a leaderboard server)")
            continue  # nothing lalmeval can score the way the peer does: listed as a gap, not shipped
        notes = [*entry.differs, *(f"not reproduced: {g}" for g in entry.gaps)]
        if notes:
            spec["origin"] += " | " + " | ".join(notes)
        files.setdefault(entry.file, OrderedDict())[entry.final] = spec
    groups = _groups(entries, au, lmms, mapping)
    for peer, members in groups.items():
        files[f"groups/{peer}"] = members
    return files, entries, mapping


def _groups(entries: list[Entry], au: dict, lmms: dict, mapping: dict) -> dict[str, OrderedDict]:
    shipped = {(e.peer, e.name): e.final for e in entries if e.spec.get("metrics")}
    out: dict[str, OrderedDict] = OrderedDict()
    au_groups = OrderedDict()
    for group, members in au["groups"].items():
        names = [shipped[("au_harness", m)] for m in members if ("au_harness", m) in shipped]
        if names:
            au_groups[f"{group}@au_harness"] = OrderedDict(members=names, aggregation="mean", reproduces=f"au_harness:{group}",
                                                           origin=f"AU-Harness task folder {group}: every task below it, each weighing 1 (utils/util.py calculate_aggregates)")
    out["au_harness"] = au_groups
    for peer, label in (("lmms", "main"), ("lmms_v0.3", "v0.3")):
        rev = lmms["revisions"][label]
        found = OrderedDict()
        for group, info in rev["groups"].items():
            names = [shipped.get((peer, m)) or (f"{m}@{peer}" if m in rev["groups"] else None) for m in info["members"]]
            names = [n for n in names if n and (n.removesuffix(f"@{peer}") in rev["groups"] or n in shipped.values())]
            if not names:
                continue
            agg = info.get("aggregate_metric_list")
            weighted = any(isinstance(a, dict) and a.get("weight_by_size") for a in (agg if isinstance(agg, list) else [agg] if agg else []))
            how = ("aggregate_metric_list with weight_by_size" if weighted else "aggregate_metric_list, unweighted") if agg else \
                "no aggregate_metric_list: lmms-eval prints no group score; the unweighted mean is what aggregate_metric_list's defaults would give"
            found[f"{group}@{peer}"] = OrderedDict(members=names, aggregation="weighted_mean" if weighted else "mean",
                                                   reproduces=f"{peer}:{group}", origin=f"lmms-eval {info['file']} @ {rev['commit'][:12]}: {how}")
        out[peer] = found
    kimi = OrderedDict()
    for dataset, subsets in mapping.get("kimi_subsets", {}).items():
        names = [shipped[("kimi", f"{dataset}-{s}")] for s in subsets if ("kimi", f"{dataset}-{s}") in shipped]
        if names:
            kimi[f"{dataset}@kimi"] = OrderedDict(members=names, aggregation="mean", reproduces=f"kimi:{dataset}",
                                                  origin=f"Kimi-Audio-Evalkit {dataset}: one entry per subset, each judged as its evaluate() judges it; "
                                                         "Kimi-Audio-Evalkit prints each subset's score and no overall one, so the group's mean is lalmeval's")
    out["kimi"] = kimi
    return out


def render(files: dict[str, OrderedDict]) -> dict[str, str]:
    """Relative path → file text."""
    return {f"runspecs/{name}.json": json.dumps(body, indent=2, ensure_ascii=False) + "\n" for name, body in files.items() if body}


def outputs(root: Path = ROOT) -> dict[str, str]:
    """Every file the generator owns, as it should read."""
    files, entries, mapping = build(root)
    texts = render(files)
    from scripts.catalog_docs import docs_text  # the docs need the built catalog: imported late

    texts["docs/catalog.md"] = docs_text(root, files, entries, mapping)
    return texts


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args(argv)
    texts = outputs(ROOT)
    stale = [path for path, text in texts.items() if not (ROOT / path).is_file() or (ROOT / path).read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"out of date: {path} (run python scripts/generate_catalog.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
        (ROOT / path).write_text(texts[path], encoding="utf-8")
    print(f"{len(texts)} files, {len(stale)} written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
