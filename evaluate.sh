#!/usr/bin/env bash
# Run an evaluation: bash evaluate.sh [--config FILE] [--output-dir DIR] [--run-id ID] [--debug] ...
# Sets up .venv/ on first use (scripts/setup-venv.sh), then runs `lalmeval run` inside it from the
# current directory, so the paths you give are relative to where you are.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup-venv.sh"
# The commands lalmeval prints (resume, retry) then start the way this one was started.
export LALMEVAL_ENTRY="bash $(printf '%q' "$0")"
exec python -m lalmeval run "$@"
