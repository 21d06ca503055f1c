"""Replica groups: the servers of one model entry, or of several entries that share a `name`.

Different names are different models, whatever their `model` id: two checkpoints served under one
`--served-model-name`, or one model reached directly and through a proxy, are evaluated and scored
apart. Replicas are declared, never guessed: a `url` list, `replicas: N`, or entries repeating a
name. A group is evaluated once: its samples sit in one queue that every replica's workers pull
from as their slots free up (a faster replica pulls more), and a replica that goes down leaves its
work to the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lalmeval.config.schema import Config, ModelInfo
from lalmeval.errors import UserError
from lalmeval.inference.ports import PORT, fill_ports

# Settings that decide a reply: every replica of a group must agree on them.
_SHARED = ("model", "inference_type", "temperature", "max_tokens", "audio_format", "chunk_size", "long_audio", "api_version",
           "generation_kwargs", "modalities", "audio")


@dataclass(frozen=True)
class Replica:
    """One server of a group: a copy of its entry's settings with this replica's single URL."""

    info: ModelInfo
    entry: str      # the name of the config entry it comes from (the group's name)
    index: int      # 0, 1, ... within the group (the {replica} of a launch command)
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
        (a port picked at run time changes every run; the server it stands for does not), and the launch
        commands that start them: a command is often all a config says of the weights behind the URL."""
        urls = " ".join(sorted((r.configured or r.info.url).rstrip("/") for r in self.replicas))
        return urls + "".join(f" launched by {command}" for command in sorted({r.info.launch for r in self.replicas if r.info.launch}))


def _urls(entry: ModelInfo) -> list[tuple[str, str]]:
    """(URL, URL as configured) of each of an entry's replicas: a {port} becomes a free port picked now."""
    configured = entry.replica_urls()
    urls = fill_ports(configured[0], len(configured), f"model '{entry.name}'") if PORT in configured[0] else configured
    return list(zip(urls, configured))


def model_groups(config: Config) -> list[ModelGroup]:
    """The config's entries grouped by name, in config order."""
    grouped: dict[str, list[ModelInfo]] = {}
    for entry in config.models:
        grouped.setdefault(entry.name, []).append(entry)
    groups = []
    for name, entries in grouped.items():
        _check_agree(entries, lambda e: {k: getattr(e, k) for k in _SHARED})
        servers = [(e, url, configured) for e in entries for url, configured in _urls(e)]
        group = ModelGroup(name, tuple(Replica(e.model_copy(update={"url": url, "replicas": 1}), name, i, configured)
                                       for i, (e, url, configured) in enumerate(servers)))
        stripped = [url.rstrip("/") for _, url, _ in servers]
        repeated = sorted({u for u in stripped if stripped.count(u) > 1})
        if repeated:  # one server listed twice as a replica would be sent twice the load it can take
            raise UserError(f"model '{name}': {repeated[0]} is listed twice as one of its replicas")
        groups.append(group)
    return groups


def _check_agree(entries: list[ModelInfo], settings: Callable[[ModelInfo], dict]) -> None:
    first = settings(entries[0])
    for index, entry in enumerate(entries[1:], 1):
        other = settings(entry)
        for key in first:
            if first[key] != other[key]:
                raise UserError(
                    f"models: the entries named '{entry.name}' are replicas of one model, but their {key} differs "
                    f"({first[key]!r} vs {other[key]!r} in entry {index + 1} of that name); give them the same {key}, "
                    f"or different names to evaluate them as different models")
