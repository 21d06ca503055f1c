import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.workspace import Workspace  # noqa: E402


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)
