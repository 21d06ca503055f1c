"""Parquet files laid out by hub configuration, chosen by `subset` and `split` — never merged across
configurations, and read by the parquet page reader rather than converted by `datasets`.

A hub repository (or a local snapshot of one, or its copy in the hub cache) says which files make
which configuration in one of two ways:

- its README's `configs:` front matter, each with `data_files` — a pattern, a list of patterns, or
  `{split, path}` entries — as push_to_hub writes it (`clean/test-*` for configuration `clean`);
- the files' places alone, with no such README: `{config}/{split}/0000.parquet` (the hub's parquet
  conversion, `revision: refs/convert/parquet`), `{config}/{split}-00000-of-00001.parquet` and
  `data/{split}-*.parquet` (push_to_hub), `data/{config}/{split}-*.parquet`. `datasets` knows one
  configuration only there: every configuration's files of a split merged, and a `subset` "not found".

`subset` picks the configuration (it may be left out when there is one, or when the README marks one
`default`), `split` its files. A configuration whose files are not all parquet, or whose README entry
asks for reading options (`sep`, `columns`, `filters`), is left to `datasets.load_dataset`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence
from urllib.parse import quote

from lalmeval.data.folder import READERS, data_files
from lalmeval.errors import UserError

Configs = dict[str, dict[str, list[str]]]  # configuration → split → files (paths relative to the root, "/"-separated)

# The words the hub's split naming rules read as splits: a folder named so holds a split, not a configuration.
SPLIT_WORDS = {"train", "training", "validation", "valid", "dev", "val", "test", "testing", "eval", "evaluation"}
_SPLIT_FILE = re.compile(r"^(\w+?)(-\d+-of-\d+(-\w+)?)?\.parquet$")  # test.parquet, test-00000-of-00002.parquet
DEFAULT_FOLDER = "data"  # push_to_hub's folder of the default configuration
# README config keys that change nothing about which rows are read; any other (sep, columns, filters,
# drop_labels...) is a reading option only `datasets` carries out.
_PLAIN_KEYS = {"config_name", "data_files", "default", "version", "features", "description", "dataset_info"}


@dataclass(frozen=True)
class Layout:
    """Which files make which split of which configuration, and what the README adds about them."""

    configs: Configs
    default: Optional[str] = None  # the configuration read when `subset` is left out
    options: frozenset[str] = frozenset()  # configurations whose README entry asks for reading options
    patterns: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # the README's data_files, for messages


@dataclass(frozen=True)
class Choice:
    """The files of the chosen configuration's split, and whether the page reader reads them."""

    config: str
    files: list[str]
    ours: bool


def _placed(path: str) -> Optional[tuple[str, str]]:
    """(configuration, split) of one parquet file's relative path; None when it is not laid out so."""
    parts = path.split("/")
    split_file = _SPLIT_FILE.match(parts[-1])
    named = split_file.group(1) if split_file and not split_file.group(1).isdigit() else None
    if parts[0] == DEFAULT_FOLDER and len(parts) == 4:
        config, split = parts[1], parts[2]  # data/{config}/{split}/0000.parquet
    elif parts[0] == DEFAULT_FOLDER and len(parts) == 3 and parts[1].lower() not in SPLIT_WORDS and named:
        config, split = parts[1], named  # data/{config}/{split}-00000-of-00001.parquet
    elif len(parts) == 3:
        config, split = parts[0], parts[1]
    elif len(parts) == 2 and named:
        config, split = parts[0], named
    else:
        return None
    if config.lower() in SPLIT_WORDS:
        return None  # test/0000.parquet: a folder per split
    return ("default" if config == DEFAULT_FOLDER else config), split


def by_config(paths: Sequence[str]) -> Optional[Layout]:
    """The layout of these files by their places, or None when they are not laid out so (only
    `data/` — the one default configuration — is left to the hub's own split naming rules)."""
    configs: Configs = {}
    for path in [p for p in paths if Path(p).suffix.lower() in READERS]:
        if not path.endswith(".parquet") or (place := _placed(path)) is None:
            return None
        configs.setdefault(place[0], {}).setdefault(place[1], []).append(path)
    if not configs or set(configs) == {"default"}:
        return None
    return Layout({config: {split: sorted(files) for split, files in splits.items()} for config, splits in sorted(configs.items())})


def card_configs(readme: str, where: str = "README.md") -> Optional[list[dict[str, Any]]]:
    """The `configs:` entries of a dataset card's YAML front matter; None when it has none. Front matter that is
    not a YAML mapping is a UserError naming `where`: ignored, it would read files the card never meant."""
    import yaml

    if not readme.startswith("---"):
        return None
    head = readme[3:].split("\n---", 1)[0]
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: the dataset card's front matter (between its --- lines) is not YAML{at}: {problem}; "
                        "fix it, or remove it to have the files read by their places") from None
    if meta is not None and not isinstance(meta, dict):
        raise UserError(f"{where}: the dataset card's front matter (between its --- lines) is YAML but not a mapping of keys "
                        f"(it is a {type(meta).__name__}); fix it, or remove it to have the files read by their places")
    configs = meta.get("configs") if isinstance(meta, dict) else None
    if not isinstance(configs, list) or not all(isinstance(c, dict) and c.get("config_name") for c in configs):
        return None
    return configs


def _pattern(glob: str) -> re.Pattern[str]:
    """A data_files pattern as the hub resolves it: `*` within one folder, `**` across folders."""
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return re.compile(out + r"\Z")


def _split_patterns(data_files: Any) -> dict[str, list[str]]:
    """split → patterns of one config's data_files (a string or a list of strings is split `train`)."""
    if isinstance(data_files, str):
        return {"train": [data_files]}
    splits: dict[str, list[str]] = {}
    for item in data_files if isinstance(data_files, list) else []:
        if isinstance(item, str):
            splits.setdefault("train", []).append(item)
        elif isinstance(item, dict) and "split" in item:
            path = item.get("path", [])
            splits.setdefault(str(item["split"]), []).extend([path] if isinstance(path, str) else [str(p) for p in path])
    return splits


def _matching(globs: Sequence[str], files: Sequence[str]) -> list[str]:
    """The files the patterns match: pattern by pattern as the hub resolves them, each one's in name order."""
    found: dict[str, None] = {}
    for glob in globs:
        pattern = _pattern(glob.removeprefix("./").lstrip("/"))
        found.update(dict.fromkeys(sorted(f for f in files if pattern.match(f))))
    return list(found)


def card_layout(configs: list[dict[str, Any]], files: Sequence[str]) -> Layout:
    """The layout a card's configs give these files (relative paths; hidden ones never match)."""
    visible = [f for f in files if not any(part.startswith(".") for part in f.split("/"))]
    layout: Configs = {}
    patterns: dict[str, dict[str, list[str]]] = {}
    for entry in configs:
        name = str(entry["config_name"])
        patterns[name] = _split_patterns(entry.get("data_files"))
        layout[name] = {split: _matching(globs, visible) for split, globs in patterns[name].items()}
    marked = [str(c["config_name"]) for c in configs if c.get("default")]
    default = marked[0] if marked else ("default" if "default" in layout else next(iter(layout)) if len(layout) == 1 else None)
    # data_dir without data_files, reading options, files named by URL: found and read as `datasets` does it
    options = frozenset(str(c["config_name"]) for c in configs if set(c) - _PLAIN_KEYS or not c.get("data_files")
                        or any("://" in glob for globs in _split_patterns(c["data_files"]).values() for glob in globs))
    return Layout(layout, default, options, patterns=patterns)


def layout_of(files: Sequence[str], readme: Optional[str], where: str = "README.md") -> Optional[Layout]:
    """The layout of a repository's files (relative paths) given its README's text; None when the
    README declares no configurations and the files are not laid out by configuration."""
    configs = card_configs(readme, where) if readme else None
    return card_layout(configs, files) if configs else by_config(files)


def choose(layout: Layout, subset: Optional[str], split: str, where: str, seen: str = "") -> Choice:
    """The files of `split` of the configuration `subset` names (or of the default one); `seen`
    qualifies the lists of what exists (an offline cache holds what was downloaded)."""
    names = ", ".join(layout.configs)
    if subset is None:
        if layout.default is None and len(layout.configs) > 1:
            raise UserError(f"{where}: the data has {len(layout.configs)} configurations ({names}){seen}; name one with subset — "
                            "configurations are never merged")
        subset = layout.default or next(iter(layout.configs))
    if subset not in layout.configs:
        raise UserError(f"{where}: subset '{subset}' not found (configurations: {names}){seen}")
    if subset in layout.options:
        return Choice(subset, [], ours=False)
    splits = layout.configs[subset]
    if split not in splits:
        raise UserError(f"{where}: split '{split}' not found in configuration '{subset}' (have: {', '.join(sorted(splits))}){seen}")
    if not splits[split]:
        globs = ", ".join(layout.patterns.get(subset, {}).get(split, []))
        raise UserError(f"{where}: split '{split}' of configuration '{subset}': its data_files ({globs}) match no file{seen}")
    files = splits[split]
    return Choice(subset, files, all(f.lower().endswith(".parquet") for f in files))


def _readme(folder: Path) -> Optional[str]:
    readme = folder / "README.md"
    return readme.read_text(encoding="utf-8", errors="replace") if readme.is_file() else None


def folder_layout(folder: Path) -> Optional[Layout]:
    """A local folder's layout by configuration (a snapshot of a hub repository or of its parquet
    conversion, the hub cache's included); None when it is not laid out so."""
    readme = _readme(folder)
    where = str(folder / "README.md")
    if readme and card_configs(readme, where):
        files = [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*")) if p.is_file()]
    else:
        files = [p.relative_to(folder).as_posix() for p in data_files(folder)]
    return layout_of(files, readme, where)


def own_root(folder: Path) -> Path:
    """The folder whose files a dataset folder may read: itself, or for a snapshot in the hub cache
    (…/datasets--x--y/snapshots/<rev>, its files links into …/blobs) the repository's cache folder."""
    real = Path(os.path.realpath(folder))
    return real.parent.parent if real.parent.name == "snapshots" and (real.parent.parent / "blobs").is_dir() else real


def confined_files(folder: Path, files: Sequence[str]) -> list[str]:
    """The local paths of `files` (relative to `folder`); one whose real path (links resolved) lies outside the
    dataset's folder is a UserError, as a file a row names would be (see lalmeval.data.confine)."""
    root = str(own_root(folder))
    paths = []
    for name in files:
        path = folder / name
        real = os.path.realpath(path)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise UserError(f"{path}: a data file the dataset card's configs match is a link to {real}, outside the dataset's folder "
                            f"{root}: a dataset reads only its own files; copy the file into the folder")
        paths.append(str(path))
    return paths


@dataclass(frozen=True)
class Located:
    """A layout and where its files are: a local folder (a snapshot, the hub cache's included), or a
    hub repository at a revision."""

    layout: Layout
    folder: Optional[Path] = None
    repo: Optional[str] = None
    revision: Optional[str] = None
    seen: str = ""  # how far the listing goes, for messages

    def paths(self, files: Sequence[str], remote: bool, name: str) -> list[str]:
        """Where to read the files: local paths, hf:// addresses when `remote`, else downloaded copies."""
        if self.folder is not None:
            return confined_files(self.folder, files)
        assert self.repo is not None
        if remote:
            return [hub_url(self.repo, self.revision, f) for f in files]
        return hub_download(self.repo, self.revision, files, name)


def located_folder(folder: Path) -> Optional[Located]:
    """A local folder laid out by configuration, with where its files are."""
    layout = folder_layout(folder)
    return Located(layout, folder=folder) if layout is not None else None


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_layout(repo: str, revision: Optional[str]) -> Optional[Located]:
    """A hub repository's layout at `revision` — offline, its snapshot in the hub cache; None when it
    is not laid out by configuration or cannot be listed (`load_dataset` then says why)."""
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download

    try:
        if _offline():
            folder = Path(snapshot_download(repo, repo_type="dataset", revision=revision, local_files_only=True))
            layout = folder_layout(folder)
            return Located(layout, folder=folder, seen=" in the local hub cache") if layout is not None else None
        files = list(HfApi().list_repo_files(repo, repo_type="dataset", revision=revision))
        readme = None
        if "README.md" in files:
            readme = Path(hf_hub_download(repo, "README.md", repo_type="dataset", revision=revision)).read_text(encoding="utf-8", errors="replace")
    except UserError:
        raise   # a broken card in the local cache: said, not read past
    except Exception:  # noqa: BLE001 - not listable: the usual loading path reports it in its own words
        return None
    layout = layout_of(files, readme, f"{repo}: README.md")
    return Located(layout, repo=repo, revision=revision) if layout is not None else None


def hub_url(repo: str, revision: Optional[str], path: str) -> str:
    """The hf:// address of a file of a dataset repository at a revision (`refs/convert/parquet` quoted)."""
    at = f"@{quote(revision, safe='')}" if revision else ""
    return f"hf://datasets/{repo}{at}/{path}"


def hub_download(repo: str, revision: Optional[str], paths: Sequence[str], name: str) -> list[str]:
    """The files downloaded into the hub cache (offline: found there), in order."""
    from huggingface_hub import hf_hub_download

    local = []
    for path in paths:
        try:
            local.append(hf_hub_download(repo, path, repo_type="dataset", revision=revision))
        except Exception as exc:  # noqa: BLE001 - the library raises many types; the message is what matters
            hint = " (offline: it is not in the local cache)" if _offline() else ""
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"dataset '{name}': cannot download {path} of '{repo}'{hint}: {text}") from None
    return local
