"""The docs: the README is a front page, and the reference under docs/ builds as a site with no broken link."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.workspace import REPO

README_LIMIT = 400


def mkdocs() -> list[str]:
    """The mkdocs command of this Python (requirements-test.txt installs it), or a skip / failure saying why."""
    try:
        import mkdocs  # noqa: F401
        import material  # noqa: F401
    except ImportError as exc:
        if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
            pytest.fail(f"the docs site cannot be built: {exc} (bash test.sh installs requirements-test.txt)")
        pytest.skip(f"mkdocs is not installed ({exc}): bash test.sh installs it")
    return [sys.executable, "-m", "mkdocs"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([*mkdocs(), "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_the_docs_site_builds_strictly_offline(tmp_path):
    out = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stderr
    for page in yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]:
        (source,) = page.values()
        assert (tmp_path / "site" / source.replace(".md", "") / "index.html").is_file() or source == "index.md", source


@pytest.mark.slow
def test_a_broken_link_fails_the_docs_build(tmp_path):
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "install.md").open("a", encoding="utf-8") as page:
        page.write("\nSee [the missing page](no-such-page.md).\n")
    out = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert out.returncode != 0 and "no-such-page.md" in out.stderr, out.stderr


def test_every_docs_page_is_in_the_site_navigation():
    nav = {source for page in yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"] for source in page.values()}
    assert nav == {p.name for p in (REPO / "docs").glob("*.md")}


def test_the_readme_is_a_front_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LIMIT
    for section in ("## Install", "## Quick start (offline)", "## Examples", "## Tests", "## Layout"):
        assert f"\n{section}\n" in readme, section


def test_every_docs_link_of_the_readme_names_a_page_that_exists():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and all((REPO / link).is_file() for link in links), [link for link in links if not (REPO / link).is_file()]
