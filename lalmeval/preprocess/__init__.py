"""Preprocessors: a Sample and the run's prompt settings → the Prompt to send."""

from lalmeval.preprocess.base import PREPROCESSORS, Preprocessor
from lalmeval.preprocess import general  # noqa: F401  (registers GeneralPreprocessor)

__all__ = ["PREPROCESSORS", "Preprocessor"]
