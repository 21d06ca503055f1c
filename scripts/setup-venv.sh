#!/usr/bin/env bash
# Set up .venv/ for lalmeval: create it, install exactly the versions pinned in constraints.txt
# for its Python (3.10 to 3.13), then lalmeval itself (editable, so `lalmeval` runs this checkout).
#
#   bash scripts/setup-venv.sh          set up (or bring up to date) and stop
#   bash scripts/setup-venv.sh --check  exit 0 when .venv/ is up to date (and of LALMEVAL_PYTHON's version), 1 when a set-up is due
#   source scripts/setup-venv.sh        set up, then the calling shell runs inside .venv/
#   lalmeval_setup_tests                (after sourcing; test.sh) add requirements-test.txt, when it changed
#
# evaluate.sh and test.sh source it, so either works first on a fresh clone. The set-up runs
# again only when requirements.txt, constraints.txt or pyproject.toml changed since the last one
# (a copy of them is kept in .venv/.lalmeval-setup), when the venv's Python no longer starts, or
# when LALMEVAL_PYTHON names a Python of another version than the venv's (the venv is then made
# anew with it). LALMEVAL_PYTHON is a command, a path, or a version such as 3.10 (found by
# scripts/find-python.sh: on PATH, under pyenv, or uv's); default: python3.

_lalmeval_manifest() {
  cat "$1/requirements.txt" "$1/constraints.txt" "$1/pyproject.toml"
}

_lalmeval_version() {  # X.Y of the interpreter $1, or nothing when it does not start
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null
}

_lalmeval_ready() {  # $2: the X.Y the venv must have (empty: any)
  local root="$1" venv="$1/.venv" have
  have="$(_lalmeval_version "$venv/bin/python")" && [ -n "$have" ] && { [ -z "${2:-}" ] || [ "$have" = "$2" ]; } \
    && _lalmeval_manifest "$root" | cmp -s - "$venv/.lalmeval-setup"
}

_lalmeval_python() {  # the interpreter LALMEVAL_PYTHON names, on stdout
  local want="${LALMEVAL_PYTHON:-python3}"
  if [[ "$want" =~ ^[0-9]+\.[0-9]+$ ]]; then
    bash "$1/scripts/find-python.sh" "$want"
  else
    echo "$want"
  fi
}

_lalmeval_install() {
  local root="$1" venv="$1/.venv" python="$2" version="$3" took=$SECONDS
  echo "Setting up $venv with Python $version ($python): the versions pinned in constraints.txt, then lalmeval itself (a few minutes the first time, more while pip downloads about 390 MB; its progress follows)" >&2
  if [ "$(_lalmeval_version "$venv/bin/python")" != "$version" ]; then
    "$python" -m venv --clear "$venv" >&2 || {
      echo "error: '$python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv, or python$version-venv)" >&2
      return 2
    }
  fi
  # pip's own output is the progress report; it goes to stderr so stdout stays the results.
  # (Called inside `||`, this function runs without errexit: every step checks its own status.)
  "$venv/bin/python" -m pip install --disable-pip-version-check -c "$root/constraints.txt" -r "$root/requirements.txt" >&2 \
    && "$venv/bin/python" -m pip install --disable-pip-version-check -c "$root/constraints.txt" -e "$root" >&2 \
    || {
      echo "error: pip could not install the pinned versions into $venv for Python $version (see pip's message above); constraints.txt pins wheels for CPython 3.10 to 3.13 on Linux x86-64 — elsewhere set LALMEVAL_PYTHON=3.11 (or another of them)" >&2
      return 1
    }
  _lalmeval_manifest "$root" > "$venv/.lalmeval-setup" || return 1
  echo "Set up $venv in $((SECONDS - took)) s" >&2
}

_lalmeval_interpreter() {  # check LALMEVAL_PYTHON; prints "python version" or returns 2 with one line
  local python version
  python="$(_lalmeval_python "$1")" || return 2
  version="$(_lalmeval_version "$python")"
  if [ -z "$version" ]; then
    echo "error: '$python' does not start: install Python 3.10 to 3.13, or set LALMEVAL_PYTHON to one — a path, a command, or a version such as 3.11 (looked for on PATH and under pyenv, whose shim of an unselected version does not start)" >&2
    return 2
  fi
  if [ "${version%%.*}" -ne 3 ] || [ "${version#*.}" -lt 10 ]; then
    echo "error: lalmeval needs Python 3.10 or newer; '$python' is Python $version. Set LALMEVAL_PYTHON=3.11 (or a path to python3.10 ... python3.13)" >&2
    return 2
  fi
  [ "${version#*.}" -le 13 ] || echo "warning: Python $version: constraints.txt pins versions for 3.10 to 3.13, so pip may have to build some from source" >&2
  echo "$python $version"
}

lalmeval_setup() {
  local root want="" found="" venv_python
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv_python="$root/.venv/bin/python"
  # Without LALMEVAL_PYTHON any working venv will do; with it, the venv must be of that version.
  if [ -n "${LALMEVAL_PYTHON:-}" ]; then
    found="$(_lalmeval_interpreter "$root")" || return 2
    want="${found##* }"
  fi
  if ! _lalmeval_ready "$root" "$want"; then
    mkdir -p "$root/.venv"
    # Two commands started at once on a fresh clone must not install into one venv together.
    exec 9<"$root/.venv"
    command -v flock >/dev/null 2>&1 && flock 9
    if ! _lalmeval_ready "$root" "$want"; then
      # An out-of-date venv keeps its own Python unless LALMEVAL_PYTHON asks for another.
      [ -n "$found" ] || { [ -n "$(_lalmeval_version "$venv_python")" ] && found="$venv_python $(_lalmeval_version "$venv_python")"; } \
        || found="$(_lalmeval_interpreter "$root")" || { exec 9<&-; return 2; }
      _lalmeval_install "$root" "${found% *}" "${found##* }" || { local status=$?; exec 9<&-; return "$status"; }
    fi
    exec 9<&-  # closing the descriptor releases the lock; nothing started later inherits it
  fi
  # shellcheck disable=SC1091
  source "$root/.venv/bin/activate"
}

_lalmeval_test_manifest() {
  cat "$1/requirements-test.txt" "$1/requirements.txt" "$1/constraints.txt" "$1/pyproject.toml"
}

lalmeval_setup_tests() {  # test.sh: what only the tests need (requirements-test.txt), on top of the set-up
  local root venv
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv="$root/.venv"
  _lalmeval_test_manifest "$root" | cmp -s - "$venv/.lalmeval-test-setup" && return 0
  exec 9<"$venv"
  command -v flock >/dev/null 2>&1 && flock 9
  if ! _lalmeval_test_manifest "$root" | cmp -s - "$venv/.lalmeval-test-setup"; then
    echo "Adding what the tests need to $venv: requirements-test.txt (pytest, the trackers, METEOR's nltk, mkdocs), pinned by constraints.txt" >&2
    "$venv/bin/python" -m pip install --disable-pip-version-check -c "$root/constraints.txt" -r "$root/requirements-test.txt" >&2 || {
      echo "error: pip could not install requirements-test.txt into $venv (see pip's message above)" >&2
      exec 9<&-
      return 1
    }
    _lalmeval_test_manifest "$root" > "$venv/.lalmeval-test-setup"
  fi
  exec 9<&-
}

if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = "--check" ]; then
  _root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if [ -n "${LALMEVAL_PYTHON:-}" ]; then
    _found="$(_lalmeval_interpreter "$_root")" || exit 2
    _lalmeval_ready "$_root" "${_found##* }"
  else
    _lalmeval_ready "$_root"
  fi
elif [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  lalmeval_setup
  echo "Ready: 'source .venv/bin/activate' puts the lalmeval command on your PATH" >&2
else
  lalmeval_setup
fi
