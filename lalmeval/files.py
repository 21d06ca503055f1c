"""Reading the user's files (config, prompts, runspecs, data) with one clear error per problem."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Optional

import yaml

from lalmeval.errors import DISK_FULL, UserError, write_failed
from lalmeval.text import mended, may_spell_surrogates

# YAML aliases may be nested so that a few hundred bytes expand to billions of nodes; count the
# expanded size on the composed graph (linear in its distinct nodes) before constructing anything.
MAX_YAML_NODES = 200_000


def data_path(source: str, base: Optional[Path]) -> Path:
    """The file a data row names, by the one rule for audio and images: an absolute (or ~) path as is; a relative
    one against the data's folder, else against the working folder when it exists only there (EvalScope's examples
    name files from where they are run). Whether the dataset may read it is decided apart (lalmeval.data.confine)."""
    path = Path(source).expanduser()
    if path.is_absolute():
        return path
    here = base / path if base is not None else None
    if here is not None and os.path.lexists(here):
        return here
    there = Path.cwd() / path
    return there if here is None or os.path.lexists(there) else here


def open_error(path: Path, exc: OSError, what: str) -> UserError:
    """A one-line error for a file that cannot be opened."""
    if isinstance(exc, FileNotFoundError):
        return UserError(f"{path}: {what} not found")
    if isinstance(exc, IsADirectoryError) or path.is_dir():
        return UserError(f"{path}: {what} is a directory, expected a file")
    if isinstance(exc, PermissionError):
        return UserError(f"{path}: {what} is not readable (permission denied)")
    return UserError(f"{path}: {what} cannot be read: {exc.strerror or exc}")


def encoding_error(path: Path, exc: UnicodeDecodeError, what: str, line: Optional[int] = None) -> UserError:
    """A one-line error for bytes that are not UTF-8."""
    where = f" line {line}:" if line else ""
    return UserError(f"{path}:{where} {what} is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})")


def file_kind(mode: int) -> str:
    """What a non-regular file is, as a phrase: 'a directory', 'a named pipe', ..."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


# Kernel trees whose "regular" files are process state (/proc/self/environ holds every key of the
# environment) or hardware: never read as data, whatever a dataset names or a config allows.
SYSTEM_TREES = ("/proc", "/sys", "/dev")


def system_tree(path: str) -> Optional[str]:
    """The system tree (/proc, /sys, /dev) the real path of `path` lies in, if any."""
    real = os.path.realpath(path)
    return next((tree for tree in SYSTEM_TREES if real == tree or real.startswith(tree + os.sep)), None)


def check_regular(path: Path, what: str) -> None:
    """A file the run will read or write must be a regular file or not exist yet: opening a named
    pipe blocks for ever, and a directory or device is no place for records."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"{path}: {what} cannot be checked: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise UserError(f"{path}: {what} is {file_kind(mode)}, expected a regular file")


def read_text(path: Path, what: str = "file") -> str:
    """The UTF-8 text of a regular file, or a UserError naming the file and the problem."""
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise UserError(f"{path}: {what} is not a regular file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise open_error(path, exc, what) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise encoding_error(path, exc, what) from None


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    # Only the mapping's own keys: a key that overrides one merged in by `<<: *anchor` is intended.
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (str, int, float, bool)) and key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}' (first at line {seen[key] + 1})", key_node.start_mark)
        if isinstance(key, (str, int, float, bool)):
            seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _expanded_size(root: yaml.Node) -> int:
    sizes: dict[int, int] = {}
    order: list[yaml.Node] = []
    stack = [root]
    while stack:  # post-order without recursion: aliases can nest deeply
        node = stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = -1
        order.append(node)
        stack.extend(_children(node))
    for node in reversed(order):
        sizes[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(c)] for c in _children(node)))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(path: Path, what: str = "YAML file") -> Any:
    """Parse a YAML file: duplicate keys and alias bombs are errors naming the file and line."""
    text = read_text(path, what)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_NODES:
            raise UserError(f"{path}: {what} expands to more than {MAX_YAML_NODES} values through aliases (&anchor / *alias); refusing it")
        value = loader.construct_document(node)
        return mended(value) if may_spell_surrogates(text) else value
    except RecursionError:  # PyYAML composes and constructs recursively
        raise UserError(f"{path}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()


class DuplicateKey(ValueError):
    """A JSON object that names one key twice (json.loads would keep the last silently)."""


class TooDeep(ValueError):
    """JSON nested deeper than the parser's recursion allows."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"duplicate key '{key}'")
        out[key] = value
    return out


def parse_json(text: str) -> Any:
    """json.loads that raises DuplicateKey on a repeated key and TooDeep on nesting it cannot follow."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
        # "\ud800" decodes to a string no file, hash or request can encode: mended where it enters.
        return mended(value) if may_spell_surrogates(text) else value
    except RecursionError:
        raise TooDeep("nested too deeply") from None


def load_json(path: Path, what: str = "JSON file") -> Any:
    """Parse a JSON file: invalid JSON and duplicate keys are errors naming the file."""
    return parse_json_text(path, read_text(path, what))


def parse_json_text(path: Path, text: str) -> Any:
    """Parse the text of the JSON file `path`; errors name the file and line."""
    return parse_json_at(str(path), text, lines=True)


def parse_json_at(where: str, text: str, lines: bool = False) -> Any:
    """Parse JSON found at `where` (a file, or a file and line); a UserError starting with `where`
    for invalid JSON, a duplicate key or nesting too deep, with the line inside `text` if `lines`."""
    try:
        return parse_json(text)
    except DuplicateKey as exc:
        raise UserError(f"{where}: {exc}") from None
    except TooDeep as exc:
        raise UserError(f"{where}: invalid JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        at = f" at line {exc.lineno}" if lines else ""
        raise UserError(f"{where}: invalid JSON{at}: {exc.msg}") from None


def check_writable_dir(path: Path, what: str) -> None:
    """Create `path` if needed and prove a file can be written there, before any request is sent.

    A folder that cannot be used is bad input (UserError); a full disk is a refused write (WriteFailed)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{path}: {what} is a file, expected a directory") from None
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise write_failed(path, exc) from None
        raise UserError(f"{path}: {what} cannot be created: {exc.strerror or exc}") from None
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise write_failed(path, exc) from None
        raise UserError(f"{path}: {what} is not writable: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{path}: {what} is not writable")
