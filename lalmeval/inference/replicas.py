"""Replica groups: model entries that share `model` and `inference_type` serve one model together.

A group is evaluated once: its samples sit in one queue that every replica's workers pull from as
their slots free up (a faster replica pulls more), and a replica that goes down leaves its work to
the others. Scores, records and reports name the group after its first entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lalmeval.config import Config, ModelInfo
from lalmeval.errors import UserError
from lalmeval.inference.ports import PORT, fill_ports

# Settings that decide a reply: every replica of a group must agree on them.
_SHARED = ("temperature", "max_tokens", "audio_format", "chunk_size", "long_audio", "api_version", "generation_kwargs")


@dataclass(frozen=True)
class Replica:
    """One server of a group: a copy of its entry's settings with this replica's single URL."""

    info: ModelInfo
    entry: str      # the config entry it comes from
    index: int      # 0, 1, ... within that entry (the {replica} of its launch command)
    configured: str = ""  # its URL as the config writes it: with {port} still in it when the port is picked at run time

    @property
    def label(self) -> str:
        return self.info.url


@dataclass(frozen=True)
class ModelGroup:
    """The replicas serving one model; `name` is what scores and files call it."""

    name: str
    replicas: tuple[Replica, ...]

    @property
    def info(self) -> ModelInfo:
        """The group's shared settings (its first replica's)."""
        return self.replicas[0].info

    @property
    def entries(self) -> list[str]:
        return list(dict.fromkeys(r.entry for r in self.replicas))

    @property
    def identity(self) -> str:
        """What stands for 'the same server' in a request's identity: the set of replica URLs as configured
        (a port picked at run time changes every run; the server it stands for does not)."""
        return " ".join(sorted((r.configured or r.info.url).rstrip("/") for r in self.replicas))


def _replicas(entry: ModelInfo) -> list[Replica]:
    configured = entry.replica_urls()
    urls = fill_ports(configured[0], len(configured), f"model '{entry.name}'") if PORT in configured[0] else configured
    return [Replica(entry.model_copy(update={"url": url, "replicas": 1}), entry.name, i, template)
            for i, (url, template) in enumerate(zip(urls, configured))]


def model_groups(config: Config) -> list[ModelGroup]:
    """The config's entries grouped by (model, inference_type), in config order."""
    grouped: dict[tuple[str, str], list[ModelInfo]] = {}
    for entry in config.models:
        grouped.setdefault((entry.model, entry.inference_type), []).append(entry)
    groups = []
    for entries in grouped.values():
        _check_agree(entries, lambda e: {k: getattr(e, k) for k in _SHARED})
        group = ModelGroup(entries[0].name, tuple(r for e in entries for r in _replicas(e)))
        urls = [r.info.url.rstrip("/") for r in group.replicas]
        repeated = sorted({u for u in urls if urls.count(u) > 1})
        if repeated:  # one server listed twice as a replica would be sent twice the load it can take
            raise UserError(f"models {', '.join(repeated and group.entries)}: {repeated[0]} is listed twice as a replica of model '{group.info.model}'")
        groups.append(group)
    return groups


def _check_agree(entries: list[ModelInfo], settings: Callable[[ModelInfo], dict]) -> None:
    first = settings(entries[0])
    for entry in entries[1:]:
        other = settings(entry)
        for key in first:
            if first[key] != other[key]:
                raise UserError(
                    f"models '{entries[0].name}' and '{entry.name}' share model '{entry.model}' and inference_type, so they are "
                    f"replicas of one model, but their {key} differs ({first[key]!r} vs {other[key]!r}); give them the same "
                    f"{key}, or different `model` ids to evaluate them separately")
