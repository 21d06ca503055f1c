#!/usr/bin/env bash
# Run an evaluation: bash evaluate.sh [--config FILE] [--output-dir DIR] [--run-id ID] [--debug]
# Uses the current Python when lalmeval's dependencies import; otherwise creates .venv and installs
# requirements.txt into it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

check='import lalmeval, aiohttp, datasets, jiwer, pydantic, yaml, numpy, soundfile, soxr, sacrebleu, rouge_score, whisper_normalizer, zhconv, cn2an, scipy, regex, MeCab, ipadic'
if [ -z "${VIRTUAL_ENV:-}" ] && [ -x .venv/bin/python ]; then
  source .venv/bin/activate
fi
if ! python -c "$check" >/dev/null 2>&1; then
  echo "Setting up .venv (first run): installing requirements.txt ..." >&2
  python3 -m venv .venv
  source .venv/bin/activate
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -r requirements.txt
fi
exec python -m lalmeval run "$@"
