import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.workspace import Workspace  # noqa: E402

# What a test run may leave in the checkout: interpreter and pytest caches, the set-up venv and
# the editable install's metadata. Anything else a test writes belongs under tmp_path.
_EXPECTED = ("__pycache__/", ".pytest_cache/", ".venv/", ".egg-info/")
_BEFORE = pytest.StashKey[set]()


def _untracked() -> set[str]:
    """Untracked and ignored paths of the checkout, or an empty set outside a git checkout."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--ignored"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if out.returncode != 0:
        return set()
    paths = {line[3:] for line in out.stdout.splitlines() if line[:2] in ("??", "!!")}
    return {p for p in paths if not any(part in p for part in _EXPECTED)}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = _untracked()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test wrote into the repository (it would end up committed)."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    new = sorted(_untracked() - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "tests wrote into the repository (write under tmp_path instead): " + ", ".join(new[:10])
        if reporter is not None:
            reporter.write("\n")
            reporter.write_sep("=", message, red=True)
        else:
            print(message, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)
