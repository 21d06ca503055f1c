#!/usr/bin/env bash
# Set up .venv/ for lalmeval: create it, install exactly the versions pinned in constraints.txt,
# then lalmeval itself (editable, so the `lalmeval` command runs this checkout).
#
#   bash scripts/setup-venv.sh          set up (or bring up to date) and stop
#   bash scripts/setup-venv.sh --check  exit 0 when .venv/ is up to date, 1 when a set-up is due
#   source scripts/setup-venv.sh        set up, then the calling shell runs inside .venv/
#
# evaluate.sh and test.sh source it, so either works first on a fresh clone. The set-up runs
# again only when requirements.txt, constraints.txt or pyproject.toml changed since the last one
# (a copy of them is kept in .venv/.lalmeval-setup), or when the venv's Python no longer starts.
# LALMEVAL_PYTHON names the Python that creates the venv (default: python3; 3.10 or newer).

_lalmeval_manifest() {
  cat "$1/requirements.txt" "$1/constraints.txt" "$1/pyproject.toml"
}

_lalmeval_ready() {
  local root="$1" venv="$1/.venv"
  "$venv/bin/python" -c '' >/dev/null 2>&1 && _lalmeval_manifest "$root" | cmp -s - "$venv/.lalmeval-setup"
}

_lalmeval_install() {
  local root="$1" venv="$1/.venv" python="${LALMEVAL_PYTHON:-python3}"
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "error: '$python' not found: install Python 3.10 or newer, or set LALMEVAL_PYTHON=/path/to/python3" >&2
    return 2
  fi
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "error: lalmeval needs Python 3.10 or newer; '$python' is $("$python" -V 2>&1). Set LALMEVAL_PYTHON=/path/to/python3.11" >&2
    return 2
  fi
  echo "Setting up $venv: the versions pinned in constraints.txt, then lalmeval itself (a minute or two the first time)" >&2
  if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
    "$python" -m venv --clear "$venv" >&2 || {
      echo "error: '$python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
      return 2
    }
  fi
  # pip's own output is the progress report; it goes to stderr so stdout stays the results.
  # (Called inside `||`, this function runs without errexit: every step checks its own status.)
  "$venv/bin/python" -m pip install --disable-pip-version-check -c "$root/constraints.txt" -r "$root/requirements.txt" >&2 || return 1
  "$venv/bin/python" -m pip install --disable-pip-version-check -c "$root/constraints.txt" -e "$root" >&2 || return 1
  _lalmeval_manifest "$root" > "$venv/.lalmeval-setup" || return 1
  echo "Set up $venv" >&2
}

lalmeval_setup() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if ! _lalmeval_ready "$root"; then
    mkdir -p "$root/.venv"
    # Two commands started at once on a fresh clone must not install into one venv together.
    exec 9<"$root/.venv"
    command -v flock >/dev/null 2>&1 && flock 9
    _lalmeval_ready "$root" || _lalmeval_install "$root" || { local status=$?; exec 9<&-; return "$status"; }
    exec 9<&-  # closing the descriptor releases the lock; nothing started later inherits it
  fi
  # shellcheck disable=SC1091
  source "$root/.venv/bin/activate"
}

if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = "--check" ]; then
  _lalmeval_ready "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
elif [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  lalmeval_setup
  echo "Ready: 'source .venv/bin/activate' puts the lalmeval command on your PATH" >&2
else
  lalmeval_setup
fi
