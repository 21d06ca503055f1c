"""A built wheel carries the catalog, the demo data and the demo config: lalmeval works outside a checkout.

The wheel is built from a copy of the source (nothing is written into the checkout) and installed
without its dependencies into a fresh venv that borrows this environment's packages through a
.pth line, so the installed lalmeval, not the checkout, answers from a folder outside the
repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.support.workspace import REPO

LEFT_BEHIND = shutil.ignore_patterns(".git", ".venv", "build", "dist", "run_logs", "*.egg-info", "__pycache__", ".pytest_cache")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a venv holding only the wheel built from this source."""
    root = tmp_path_factory.mktemp("wheel")
    source = Path(shutil.copytree(REPO, root / "source", ignore=LEFT_BEHIND))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-w", str(root / "dist")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next((root / "dist").glob("lalmeval-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    target = venv / "bin" / "python"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(target), "install", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    site = subprocess.run([str(target), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True)
    # The dependencies come from this environment; its lalmeval (an editable install of the checkout) is
    # not activated by a plain path line, so `import lalmeval` finds the wheel's copy first.
    (Path(site.stdout.strip()) / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def outside(bin_dir: Path, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}/usr/bin:/bin"
    return subprocess.run([str(bin_dir / "lalmeval"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_installed_package_is_the_wheel_s_and_carries_its_data(installed, tmp_path):
    probe = "import lalmeval, lalmeval.catalog.bundled as b; print(lalmeval.__file__); print(b.RUNSPECS); print(b.DEMO_COMMANDS)"
    out = subprocess.run([str(installed / "python"), "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    package = Path(out[0]).parent
    assert package.is_relative_to(installed.parent) and not package.is_relative_to(REPO)
    assert Path(out[1]) == package / "_data" / "runspecs" and Path(out[2]) == package / "_data" / "private_datasets" / "demo_commands"
    shipped = sorted(p.relative_to(package / "_data" / "runspecs") for p in Path(out[1]).rglob("*.json"))
    assert shipped == sorted(p.relative_to(REPO / "runspecs") for p in (REPO / "runspecs").rglob("*.json"))
    clips = sorted(p.name for p in (Path(out[2]) / "audio").iterdir())
    assert clips == sorted(p.name for p in (REPO / "private_datasets" / "demo_commands" / "audio").iterdir()) and len(clips) == 40
    # Installed as a package, an optional extra is named as one; the wheel carries the license text.
    hint = subprocess.run([str(installed / "python"), "-c", "import lalmeval.catalog.bundled as b; print(b.install('mlflow'))"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert hint == "pip install 'lalmeval[mlflow]'"
    licenses = list(package.parent.glob("lalmeval-*.dist-info/**/LICENSE"))
    assert licenses and "Apache License" in licenses[0].read_text()


def test_list_outside_the_checkout_shows_the_whole_catalog(installed, tmp_path):
    wheel = outside(installed, "list", "--expand", cwd=tmp_path)
    checkout = subprocess.run([sys.executable, "-m", "lalmeval", "list", "--expand"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert wheel.returncode == checkout.returncode == 0, wheel.stderr + checkout.stderr
    # The same catalog; only where local data would be differs (the wheel's copy, or the checkout's folders).
    package = Path(subprocess.run([str(installed / "python"), "-c", "import lalmeval; print(lalmeval.__file__)"], cwd=tmp_path,
                                  capture_output=True, text=True, check=True).stdout.strip()).parent
    shown = wheel.stdout.replace(str(package / "_data"), "<root>")
    assert shown == checkout.stdout.replace(str(REPO), "<root>")
    assert "demo_commands" in wheel.stdout and len(wheel.stdout.splitlines()) > 100


def test_init_outside_the_checkout_writes_a_starter_with_bundled_clips_that_validates(installed, tmp_path):
    out = outside(installed, "init", "my-eval", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in (tmp_path / "my-eval" / "data" / "my_dataset.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all((tmp_path / "my-eval" / "data" / r["audio"]).stat().st_size > 1000 for r in rows)
    checked = outside(installed, "validate", "--config", "my-eval/config.yaml", cwd=tmp_path)
    assert checked.returncode == 0 and "my_dataset × word_error_rate" in checked.stdout, checked.stderr


@pytest.mark.slow
def test_the_demo_config_runs_outside_the_checkout_with_both_shipped_models(installed, tmp_path):
    """`lalmeval init --demo` writes the demo's config; its two servers are the wheel's `lalmeval serve`."""
    out = outside(installed, "init", "--demo", "demo", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    config = tmp_path / "demo" / "config.yaml"
    assert config.read_text() == (REPO / "config.yaml").read_text()
    assert "lalmeval run --config demo/config.yaml" in out.stdout
    settings = yaml.safe_load(config.read_text())
    settings["filters"] = {"num_samples": 4}  # a few clips are enough to show both servers answer
    config.write_text(yaml.safe_dump(settings))
    run = outside(installed, "run", "--config", "demo/config.yaml", "--run-id", "w", cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    scores = {s["model"]: s for s in json.loads((tmp_path / "run_logs" / "w" / "final_scores.json").read_text())["scores"]}
    assert {m: (s["num_samples"], s["num_failed"]) for m, s in scores.items()} == {"whisper-tiny.en": (4, 0), "pocketsphinx-demo": (4, 0)}
    logs = {log.name: log.read_text() for log in (tmp_path / "run_logs" / "w").glob("launch_*.log")}
    assert len(logs) == 2 and all(re.search(r"on http://127.0.0.1:\d+/v1", text) for text in logs.values()), logs


def test_init_demo_writes_the_demo_config_that_validates_and_never_overwrites(tmp_path):
    """In a checkout too: the config `bash evaluate.sh` runs, to copy anywhere."""
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert cli("init", "--demo", "d").returncode == 0
    config = tmp_path / "d" / "config.yaml"
    assert config.read_text() == (REPO / "config.yaml").read_text()
    checked = cli("validate", "--config", str(config))
    assert checked.returncode == 0 and "demo_commands × word_error_rate" in checked.stdout, checked.stderr
    config.write_text("# mine\n")
    again = cli("init", "--demo", "d")
    assert again.returncode == 2 and again.stderr.strip() == "error: d/config.yaml already exists: lalmeval init leaves it alone (pass --force to overwrite, or pick another folder)"
    assert config.read_text() == "# mine\n"
    assert cli("init", "--demo", "d", "--force").returncode == 0 and config.read_text() == (REPO / "config.yaml").read_text()
