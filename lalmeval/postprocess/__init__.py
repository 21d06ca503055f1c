"""Postprocessors: a model's raw reply → the prediction that metrics score."""

from lalmeval.postprocess.base import POSTPROCESSORS, Postprocessor
from lalmeval.postprocess import general  # noqa: F401  (registers GeneralPostprocessor)

__all__ = ["POSTPROCESSORS", "Postprocessor"]
