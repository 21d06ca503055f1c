"""`python -m models.inference_boilerplate.server` (from the repository root): the same as `lalmeval serve`.

    python -m models.inference_boilerplate.server --model pocketsphinx --port 8000
    python -m models.inference_boilerplate.server --model my_package.my_module:MyModel

The server lives in lalmeval/serve/ so that `lalmeval serve` works from any folder; this entry
keeps the older command working, with its default model (pocketsphinx).
"""

from __future__ import annotations

import argparse
import sys

from lalmeval.errors import UserError
from lalmeval.serve.main import add_arguments, serve


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve an AudioModel behind an OpenAI-compatible API (the same as lalmeval serve).")
    add_arguments(parser, default_model="pocketsphinx")
    try:
        return serve(parser.parse_args())
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
