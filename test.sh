#!/usr/bin/env bash
# Run the test suite: bash test.sh [pytest arguments]
# Sets up .venv/ on first use (scripts/setup-venv.sh), adds what only the tests need
# (requirements-test.txt), and runs pytest inside it from the repository root, whatever the
# current directory. The fast subset: bash test.sh -m "not slow".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/scripts/setup-venv.sh"
lalmeval_setup_tests
cd "$(dirname "${BASH_SOURCE[0]}")"
exec python -m pytest -q "$@"
