"""The command line: run | score | init | validate | check | list | report | serve, and what their flags change."""

from lalmeval.cli.commands import main

__all__ = ["main"]
