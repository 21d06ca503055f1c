"""`lalmeval list`: the catalog by category and family (task type), its groups, and any part expanded."""

from __future__ import annotations

from collections import Counter
from typing import Iterator, Optional

from lalmeval.catalog.runspecs import Catalog, Dataset, kimi_file
from lalmeval.config.languages import NAMES
from lalmeval.errors import UserError, closest


def peer_of(dataset: Dataset) -> str:
    """Whose declaration an entry reproduces ('lalmeval' for its own)."""
    return (dataset.spec.reproduces or "lalmeval:").partition(":")[0]


def _language(dataset: Dataset) -> str:
    # A code as written keeps its region (zh-TW); an English name shows as its code.
    return dataset.iso_language if dataset.spec.language.lower() in NAMES else dataset.spec.language


def local_data(dataset: Dataset) -> str:
    """For data that must be put in place by hand (a local path, Kimi's dataset_root): whether it is there; '' for a hub id."""
    if dataset.data_root is not None:
        path = kimi_file(dataset)
    elif dataset.spec.hf_repo.startswith((".", "/", "~")):
        path = dataset.resolve_path(dataset.spec.hf_repo)
    else:
        return ""
    return "; local data: present" if path.exists() else f"; local data: missing ({path})"


def _dataset_line(dataset: Dataset, width: int) -> str:
    local = local_data(dataset)
    peer = "" if peer_of(dataset) == "lalmeval" else f"; {peer_of(dataset)}"
    return f"    {dataset.name:<{width}}  [{_language(dataset)}; {', '.join(dataset.spec.metrics) or 'no metrics'}{local}{peer}]"


def _family_line(task_type: str, datasets: list[Dataset]) -> str:
    """One line for a family: its size, languages, whose declarations and metrics."""
    languages = sorted({d.iso_language for d in datasets})
    shown = languages[0] if len(languages) == 1 else f"{len(languages)} languages"
    peers = Counter(peer_of(d) for d in datasets)
    metrics = sorted({m for d in datasets for m in d.spec.metrics})
    local = [local_data(d) for d in datasets]
    placed = [state for state in local if state]
    present = f" · local data: {sum(s.endswith('present') for s in placed)} of {len(placed)} present" if placed else ""
    return (f"  {task_type} ({len(datasets)}): {shown} · " + ", ".join(f"{p} {n}" for p, n in sorted(peers.items()))
            + f" · {', '.join(metrics) or 'no metrics'}{present}")


def _wrapped(first: str, items: list[str], width: int = 120) -> Iterator[str]:
    """Items joined by commas, wrapped between items (never inside one)."""
    line = first
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(line) + len(piece) + 1 > width and line.strip():
            yield line.rstrip()
            line = "    "
        line += piece + " "
    yield line.rstrip()


def _expanded(datasets: list[Dataset]) -> Iterator[str]:
    width = max(len(d.name) for d in datasets)
    for dataset in sorted(datasets, key=lambda d: d.name):
        yield _dataset_line(dataset, width)


def lines(catalog: Catalog, expand: bool = False, name: Optional[str] = None) -> Iterator[str]:
    """The listing: every category and family (every dataset with `expand`), then the groups; or one part expanded."""
    if name is not None:
        yield from _part(catalog, name)
        return
    tree: dict[str, dict[str, list[Dataset]]] = {}
    for dataset in catalog.datasets.values():
        tree.setdefault(dataset.category, {}).setdefault(dataset.task_type, []).append(dataset)
    for category in sorted(tree):
        families = tree[category]
        yield f"{category} ({sum(len(v) for v in families.values())})"
        for task_type in sorted(families):
            if expand:
                yield f"  {task_type} ({len(families[task_type])})"
                yield from _expanded(families[task_type])
            else:
                yield _family_line(task_type, families[task_type])
    if catalog.groups:
        by_file: dict[str, list[str]] = {}
        for group in sorted(catalog.groups.values(), key=lambda g: g.name):
            by_file.setdefault(group.task_type, []).append(f"{group.name} ({len(catalog.members(group.name))})")
        yield f"groups ({len(catalog.groups)}): a group runs its datasets and reports a group score"
        for task_type, shown in sorted(by_file.items()):
            if expand:
                yield f"  {task_type} ({len(shown)})"
                yield from (f"    {g}" for g in shown)
            else:
                yield from _wrapped(f"  {task_type} ({len(shown)}): ", shown)
    total = f"{len(catalog.datasets)} datasets in {len(tree)} categories, {len(catalog.groups)} groups"
    yield total + ("" if expand else "; `lalmeval list --expand` or `lalmeval list NAME` shows every dataset")


def _part(catalog: Catalog, name: str) -> Iterator[str]:
    """A group, family or category with its datasets (a dataset: its own line)."""
    if name in catalog.groups:
        group = catalog.groups[name]
        members = catalog.members(name)
        yield f"{name} ({len(members)} datasets; group score: {group.spec.aggregation}; {group.source})"
        if group.spec.origin:
            yield f"  {group.spec.origin}"
        yield from _expanded(members)
        return
    try:
        datasets = catalog.resolve(name)
    except UserError:
        names = set(catalog.datasets) | set(catalog.groups) | {d.task_type for d in catalog.datasets.values()} | {d.category for d in catalog.datasets.values()}
        raise UserError(f"lalmeval list: unknown dataset, group, task type or category '{name}'{closest(name, names)}") from None
    yield f"{name} ({len(datasets)})"
    yield from _expanded(datasets)
