"""Preprocessors: a Sample and the run's prompt settings → the Prompt to send."""

from lalmeval.preprocess.base import PREPROCESSORS, Preprocessor
from lalmeval.preprocess import bfcl, general  # noqa: F401  (registers the built-ins)

__all__ = ["PREPROCESSORS", "Preprocessor"]
