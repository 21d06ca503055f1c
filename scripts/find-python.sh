#!/usr/bin/env bash
# Print the path of a working CPython X.Y:   bash scripts/find-python.sh 3.10 [--install]
#
# Looks for pythonX.Y on PATH, then in pyenv's versions folder (a pyenv shim of a version that is
# installed but not selected does not start, so the shim alone is not enough), then among the
# Pythons uv manages. With --install, when none is found, uv (from PyPI, into a venv under
# ${XDG_CACHE_HOME:-~/.cache}/lalmeval) installs one; uv downloads a CPython build, which needs
# access to github.com. Exit 1 with one line on stderr when there is none.
set -euo pipefail
want="${1:?usage: bash scripts/find-python.sh X.Y [--install]}"
install="${2:-}"

works() {  # the interpreter's real path when it starts and is CPython $want
  "$1" -c "import sys, platform; v = '%d.%d' % sys.version_info[:2]
if v == '$want' and platform.python_implementation() == 'CPython': print(sys.executable)" 2>/dev/null
}

candidates() {
  command -v "python$want" || true
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  # Newest patch release first (3.10.13 before 3.10.9).
  ls -d "$root/versions/$want".*/bin/python"$want" 2>/dev/null | sort -rV || true
  command -v uv >/dev/null 2>&1 && uv python find "$want" 2>/dev/null || true
}

for candidate in $(candidates); do
  if found="$(works "$candidate")" && [ -n "$found" ]; then
    echo "$found"
    exit 0
  fi
done

if [ "$install" = "--install" ]; then
  tools="${XDG_CACHE_HOME:-$HOME/.cache}/lalmeval/uv"
  echo "Python $want not found: installing it with uv (pip install uv into $tools)" >&2
  if { [ -x "$tools/bin/uv" ] || { python3 -m venv "$tools" && "$tools/bin/python" -m pip install --disable-pip-version-check -q uv; }; } >&2 \
     && "$tools/bin/uv" python install "$want" >&2 \
     && found="$(works "$("$tools/bin/uv" python find "$want")")" && [ -n "$found" ]; then
    echo "$found"
    exit 0
  fi
  echo "error: Python $want is not installed and uv could not install it (see above)" >&2
  exit 1
fi
echo "error: Python $want not found (looked for python$want on PATH, in ${PYENV_ROOT:-$HOME/.pyenv}/versions and among uv's Pythons)" >&2
exit 1
