"""Headless Chromium (Debian's /usr/bin/chromium) and a small DOM reader for what it rendered."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Optional

import pytest

# Chromium in a container: no sandbox, no GPU, and nothing that reaches the network.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def chromium() -> str:
    """The browser's path; skips the test where none is installed, unless CI requires one."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
        pytest.fail("chromium is required (LALMEVAL_REQUIRE_SYSTEM_PACKAGES is set) but not installed")
    pytest.skip("chromium is not installed")


def _run(*args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def dump_dom(url: str, budget_ms: int = 3000) -> str:
    """The document as it stands after the page's scripts ran (for `budget_ms` of the page's virtual time)."""
    return _run(f"--virtual-time-budget={budget_ms}", "--dump-dom", url)


def screenshot(url: str, png: Path, width: int = 1280, height: int = 2400) -> Path:
    """A PNG of the page's first `height` pixels."""
    _run(f"--window-size={width},{height}", f"--screenshot={png}", url)
    return png


@dataclass
class Node:
    """An element of the dumped DOM."""

    tag: str
    attrs: dict[str, str]
    children: list["Node | str"] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def all(self, tag: Optional[str] = None, cls: Optional[str] = None) -> list["Node"]:
        """Descendants matching a tag and/or a class, in document order."""
        found = []
        for child in self.children:
            if isinstance(child, Node):
                if (tag is None or child.tag == tag) and (cls is None or cls in child.classes):
                    found.append(child)
                found += child.all(tag, cls)
        return found

    def by_id(self, ident: str) -> "Node":
        match = [n for n in self.all() if n.attrs.get("id") == ident]
        assert match, f"no element #{ident}"
        return match[0]


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    """A tree of the (serialized, well-formed) DOM Chromium printed."""
    builder = _Builder()
    builder.feed(html)
    return builder.root
