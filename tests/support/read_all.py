"""Read every sample of a dataset in a fresh process and report its count, the SHA-1 of its clips' bytes and
how much peak memory grew while reading: memory tests measure the reader alone, not the test process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

from tests.support.workspace import REPO

_PROBE = textwrap.dedent("""
    import hashlib, json, sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    from lalmeval.config.schema import Filters
    from lalmeval.data.source import open_source
    from lalmeval.catalog.runspecs import Dataset, DatasetSpec

    def peak_mb():
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024

    path = {path!r}
    spec = DatasetSpec(hf_repo=path, language="en", **json.loads({spec!r}))
    source = open_source(Dataset("big", "c", "t", spec, Path(path).parent / "x.json"), Filters())
    before, digest, count = peak_mb(), hashlib.sha1(), 0
    for sample in source.samples():
        digest.update(sample.audio[0].source)
        count += 1
    print(json.dumps({{"count": count, "sha1": digest.hexdigest(), "grew_mb": peak_mb() - before}}))
""")


def read_all(path: Path, spec: dict[str, Any], env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """{count, sha1, grew_mb} of reading every sample of the dataset at `path` declared by `spec` (offline)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    code = _PROBE.format(repo=str(REPO), path=str(path), spec=json.dumps(spec))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
