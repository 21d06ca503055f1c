"""Postprocessors: a model's raw reply → the prediction that metrics score."""

from lalmeval.postprocess.base import POSTPROCESSORS, Postprocessor
from lalmeval.postprocess import bfcl, general, listening_mcq, mmmu_parser, vocalsound, voicebench_mcq  # noqa: F401  (registers the built-ins)

__all__ = ["POSTPROCESSORS", "Postprocessor"]
