#!/usr/bin/env bash
# Run the test suite: bash test.sh [pytest arguments]
# Sets up .venv/ on first use (scripts/setup-venv.sh) and runs pytest inside it from the
# repository root, whatever the current directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup-venv.sh"
cd "$(dirname "${BASH_SOURCE[0]}")"
exec python -m pytest -q "$@"
