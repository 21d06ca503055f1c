"""Read the peers' task declarations from their git mirrors into catalog/peers/*.json (facts only).

    python scripts/extract_peers.py [--mirrors /work/.mirror] [--out catalog/peers]

Nothing of the peers' code is kept: their YAML files are read as data (with their own `extends` /
`include` inheritance resolved here), and their Python files are only parsed (`ast`) to read which
dataset columns a function touches and which string constants (prompts) it holds. What is written
is the facts a runspec needs — hub id, configuration, split, columns, metrics, prompts, generation
settings, long-audio handling, language, groups — one JSON file per peer, sorted, so a re-run
against the same mirrors writes the same bytes.
"""

from __future__ import annotations

import argparse
import ast
import json
import posixpath
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import yaml

AU = "ServiceNow+AU-Harness"
LMMS = "EvolvingLMMs-Lab+lmms-eval"
KIMI = "MoonshotAI+Kimi-Audio-Evalkit"
LMMS_REFS = {"v0.3": "v0.3.0", "main": "HEAD"}


class Mirror:
    """A bare git repository read at one revision."""

    def __init__(self, path: Path, ref: str = "HEAD"):
        self.path, self.ref = path, ref
        self.commit = self._git("rev-parse", f"{ref}^{{commit}}").strip()
        self._files = self._git("ls-tree", "-r", "--name-only", self.commit).splitlines()

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True).stdout

    def files(self, prefix: str) -> list[str]:
        """Paths under `prefix`, sorted."""
        return sorted(f for f in self._files if f.startswith(prefix))

    def exists(self, path: str) -> bool:
        return path in self._files

    def read(self, path: str) -> str:
        return self._git("show", f"{self.commit}:{path}")


# ---------------------------------------------------------------- YAML with the peers' tags

class _Loader(yaml.SafeLoader):
    """YAML that keeps `!function module.name` as the text "!function module.name"."""


_Loader.add_constructor("!function", lambda loader, node: "!function " + loader.construct_scalar(node))
_Loader.add_multi_constructor("!", lambda loader, suffix, node: f"!{suffix} " + str(loader.construct_scalar(node)) if isinstance(node, yaml.ScalarNode) else None)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def deep_merge(base: Any, top: Any) -> Any:
    """`top` over `base`, dictionaries merged key by key (the inheritance both YAML layouts use)."""
    if isinstance(base, dict) and isinstance(top, dict):
        out = dict(base)
        for key, value in top.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    return top


# ---------------------------------------------------------------- AU-Harness

def au_resolve(mirror: Mirror, path: str, seen: frozenset = frozenset()) -> dict:
    """A task file with its `extends: ["../base.yaml#"]` parents merged in (parents first)."""
    if path in seen:
        raise ValueError(f"cyclic extends at {path}")
    doc = load_yaml(mirror.read(path)) or {}
    merged: dict = {}
    for parent in doc.get("extends") or []:
        target = parent.split("#", 1)[0] or posixpath.basename(path)
        merged = deep_merge(merged, au_resolve(mirror, posixpath.normpath(posixpath.join(posixpath.dirname(path), target)), seen | {path}))
    return deep_merge(merged, {k: v for k, v in doc.items() if k != "extends"})


def au_tasks(mirror: Mirror) -> dict:
    """Every task file (not base.yaml) under tasks/, resolved, with the folders it belongs to."""
    tasks = []
    for path in mirror.files("tasks/"):
        if not path.endswith((".yaml", ".yml")) or posixpath.basename(path) == "base.yaml":
            continue
        config = au_resolve(mirror, path)
        config["metrics"] = [m["metric"] if isinstance(m, dict) else m for m in config.get("metrics") or []]
        folders = posixpath.dirname(path).split("/")[1:]  # without the leading "tasks"
        tasks.append({"name": config.pop("task_name"), "file": path, "groups": folders, "config": config})
    tasks.sort(key=lambda t: t["name"])
    groups: dict[str, list[str]] = {}
    for task in tasks:
        for folder in task["groups"]:
            groups.setdefault(folder, []).append(task["name"])
    return {"peer": "au_harness", "repository": "https://github.com/ServiceNow/AU-Harness", "commit": mirror.commit,
            "group_aggregation": "mean",  # utils.util.calculate_aggregates: every dataset weighs 1
            "tasks": tasks, "groups": {k: sorted(v) for k, v in sorted(groups.items())}}


# ---------------------------------------------------------------- lmms-eval

def _function_facts(source: str, name: str) -> Optional[dict]:
    """Columns a function reads from `doc` and the string constants it holds (ast only)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            columns, strings = [], []
            for inner in ast.walk(node):
                key = None
                if isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and inner.value.id == "doc":
                    key = inner.slice
                elif (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "get"
                      and isinstance(inner.func.value, ast.Name) and inner.func.value.id == "doc" and inner.args):
                    key = inner.args[0]
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value not in columns:
                    columns.append(key.value)
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and inner.value.strip() and inner.value not in strings:
                    if inner is not (node.body[0].value if node.body and isinstance(node.body[0], ast.Expr) else None):
                        strings.append(inner.value)
            return {"columns": columns, "strings": strings}
    return None


def _lmms_config(mirror: Mirror, path: str, seen: frozenset = frozenset()) -> dict:
    """A task YAML with its `include:` file merged under it."""
    if path in seen:
        raise ValueError(f"cyclic include at {path}")
    doc = load_yaml(mirror.read(path)) or {}
    if not isinstance(doc, dict):
        return {}
    include = doc.get("include")
    if isinstance(include, str):
        parent = posixpath.normpath(posixpath.join(posixpath.dirname(path), include))
        if mirror.exists(parent):
            doc = deep_merge(_lmms_config(mirror, parent, seen | {path}), {k: v for k, v in doc.items() if k != "include"})
    return doc


def _function_ref(value: Any) -> Optional[tuple[str, str]]:
    if isinstance(value, str) and value.startswith("!function "):
        module, _, name = value.split(" ", 1)[1].rpartition(".")
        return module, name
    return None


def _facts_of(mirror: Mirror, folder: str, value: Any) -> Optional[dict]:
    ref = _function_ref(value)
    if ref is None:
        return None
    module = posixpath.join(folder, ref[0].replace(".", "/") + ".py")
    if not mirror.exists(module):
        return {"function": value.split(" ", 1)[1], "columns": [], "strings": [], "missing": True}
    facts = _function_facts(mirror.read(module), ref[1]) or {"columns": [], "strings": []}
    return {"function": value.split(" ", 1)[1], **facts}


def _is_audio(config: dict, facts: dict) -> bool:
    """A task whose input is audio: doc_to_audio, an audio-named visual function, or an audio column read."""
    if "doc_to_audio" in config:
        return True
    visual = facts.get("doc_to_visual") or {}
    if "audio" in (visual.get("function") or "").lower():
        return True
    kwargs = ((config.get("lmms_eval_specific_kwargs") or {}).get("default") or {})
    return "audio_column" in kwargs


def lmms_tasks(mirror: Mirror) -> dict:
    """Audio tasks and groups at one revision: their resolved YAML and what their functions read."""
    tasks, groups = [], {}
    for path in mirror.files("lmms_eval/tasks/"):
        if not path.endswith((".yaml", ".yml")) and not posixpath.basename(path).endswith("_yaml"):
            continue
        try:
            config = _lmms_config(mirror, path)
        except (yaml.YAMLError, ValueError):
            continue
        folder = posixpath.dirname(path)
        if isinstance(config.get("group"), str) and isinstance(config.get("task"), list):
            members = [t if isinstance(t, str) else t.get("task") if isinstance(t, dict) else None for t in config["task"]]
            groups[config["group"]] = {"file": path, "members": [m for m in members if isinstance(m, str)],
                                       "aggregate_metric_list": config.get("aggregate_metric_list")}
            continue
        if not isinstance(config.get("task"), str) or posixpath.basename(path).startswith("_"):
            continue
        facts = {key: f for key in ("doc_to_audio", "doc_to_visual", "doc_to_text", "doc_to_target", "doc_to_choice",
                                    "doc_to_messages", "process_results") if (f := _facts_of(mirror, folder, config.get(key)))}
        if not _is_audio(config, facts):
            continue
        for metric in config.get("metric_list") or []:
            if isinstance(metric, dict) and (agg := _facts_of(mirror, folder, metric.get("aggregation"))):
                facts.setdefault("aggregations", {})[metric.get("metric")] = agg
        tasks.append({"name": config["task"], "file": path, "config": config, "functions": facts})
    tasks.sort(key=lambda t: t["name"])
    names = {t["name"] for t in tasks}

    def audio(group: str, seen: frozenset = frozenset()) -> bool:
        members = groups[group]["members"]
        return any(m in names or (m in groups and m not in seen and audio(m, seen | {group})) for m in members)

    audio_groups = {g: v for g, v in sorted(groups.items()) if audio(g)}
    return {"revision": mirror.ref, "commit": mirror.commit, "tasks": tasks, "groups": audio_groups}


# ---------------------------------------------------------------- Kimi-Audio-Evalkit

_KIMI_BASES = {"ASRDataset": "asr", "AudioMQADataset": "mqa", "AudioRefQADataset": "refqa", "AudioOpenQADataset": "openqa"}


def _class_constants(node: ast.ClassDef) -> dict[str, Any]:
    out = {}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                out[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except ValueError:
                continue
    return out


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "..." constants (the judge prompts) and dict-of-strings constants."""
    out: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                value = ast.literal_eval(stmt.value)
            except ValueError:
                continue
            if isinstance(value, (str, dict)):
                out[stmt.targets[0].id] = value
    return out


def _downloader_facts(tree: ast.Module) -> tuple[dict[str, str], dict[str, dict]]:
    """DATASET_REGISTRY (name → downloader class) and, per class, hub ids, URLs and question texts."""
    registry: dict[str, str] = {}
    classes: dict[str, dict] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "DATASET_REGISTRY" for t in stmt.targets):
            if isinstance(stmt.value, ast.Dict):
                registry = {ast.literal_eval(k): v.id for k, v in zip(stmt.value.keys, stmt.value.values) if isinstance(v, ast.Name)}
        if isinstance(stmt, ast.ClassDef):
            hub, urls, questions = [], [], []
            for inner in ast.walk(stmt):
                if isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "load_dataset" and inner.args:
                    args = [a.value for a in inner.args if isinstance(a, ast.Constant)]
                    if args and args not in hub:
                        hub.append(args)
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    text = inner.value
                    for token in text.replace('"', " ").split():
                        if token.startswith(("http://", "https://")) and token not in urls:
                            urls.append(token)
                if isinstance(inner, (ast.Assign, ast.keyword, ast.Dict)):
                    pairs = []
                    if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name):
                        pairs = [(inner.targets[0].id, inner.value)]
                    elif isinstance(inner, ast.Dict):
                        pairs = [(k.value, v) for k, v in zip(inner.keys, inner.values) if isinstance(k, ast.Constant)]
                    for key, value in pairs:
                        if isinstance(key, str) and key.startswith("question") and isinstance(value, ast.Constant) and isinstance(value.value, str):
                            if value.value.strip() and value.value not in questions:
                                questions.append(value.value)
            classes[stmt.name] = {"load_dataset": hub, "urls": urls, "questions": questions}
    return registry, classes


def kimi_datasets(mirror: Mirror) -> dict:
    """Every dataset class (kind from its base, language, series) with its downloader's sources and questions."""
    datasets, prompts = [], {}
    for path in mirror.files("almeval/datasets/"):
        if not path.endswith(".py"):
            continue
        tree = ast.parse(mirror.read(path))
        prompts.update({k: v for k, v in _module_strings(tree).items() if k.isupper()})
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            constants = _class_constants(node)
            kind = next((_KIMI_BASES[b] for b in bases if b in _KIMI_BASES), None)
            if kind and "DATASET_NAME" in constants and not constants.get("EXCLUDE", False):
                datasets.append({"name": constants["DATASET_NAME"], "class": node.name, "file": path, "kind": kind,
                                 "series": constants.get("DATASET_SERIES"), "language": constants.get("LANG"),
                                 "audio_type": constants.get("AUDIO_TYPE"), "interactive": constants.get("INTERACTIVE")})
            elif node.name in _KIMI_BASES:
                prompts[f"{node.name}.defaults"] = {k: v for k, v in constants.items() if k in ("INTERACTIVE", "TASK", "AUDIO_TYPE")}
    registry, downloaders = _downloader_facts(ast.parse(mirror.read("data/download_benchmark.py")))
    for dataset in datasets:
        key = next((k for k in (dataset["name"], dataset["series"]) if k in registry), None)
        dataset["downloader"] = {"registry_key": key, "class": registry.get(key), **downloaders.get(registry.get(key), {})} if key else None
        defaults = prompts.get(next(b for b in _KIMI_BASES if _KIMI_BASES[b] == dataset["kind"]) + ".defaults", {})
        dataset["interactive"] = dataset["interactive"] or defaults.get("INTERACTIVE")
        dataset["audio_type"] = dataset["audio_type"] or defaults.get("AUDIO_TYPE")
    datasets.sort(key=lambda d: d["name"].lower())
    judge_prompts = {k: v for k, v in sorted(prompts.items()) if not k.endswith(".defaults")}
    return {"peer": "kimi", "repository": "https://github.com/MoonshotAI/Kimi-Audio-Evalkit", "commit": mirror.commit,
            "datasets": datasets, "judge_prompts": judge_prompts}


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", default="/work/.mirror", help="folder holding <owner>+<name>/repo bare mirrors")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "catalog" / "peers"))
    args = parser.parse_args(argv)
    root, out = Path(args.mirrors), Path(args.out)
    au = au_tasks(Mirror(root / AU / "repo"))
    write(out / "au_harness.json", au)
    lmms = {"peer": "lmms", "repository": "https://github.com/EvolvingLMMs-Lab/lmms-eval",
            "revisions": {label: lmms_tasks(Mirror(root / LMMS / "repo", ref)) for label, ref in LMMS_REFS.items()}}
    write(out / "lmms_eval.json", lmms)
    kimi = kimi_datasets(Mirror(root / KIMI / "repo"))
    write(out / "kimi.json", kimi)
    counts = {label: len(r["tasks"]) for label, r in lmms["revisions"].items()}
    print(f"au_harness: {len(au['tasks'])} tasks, {len(au['groups'])} groups; lmms: {counts}; kimi: {len(kimi['datasets'])} datasets", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
