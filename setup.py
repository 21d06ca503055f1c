"""Build hook (the project itself is described in pyproject.toml).

A wheel carries what lalmeval reads beside its code: the built-in runspecs/, the demo data
(private_datasets/demo_commands: its clips and jsonl) and the demo's config.yaml. In a checkout
they stay top-level folders (runspecs/ is where users drop their own); at build time they are
copied into the package as lalmeval/_data/ with the same layout (lalmeval/catalog/bundled.py finds them).
An editable install reads the checkout's own folders, so nothing is copied for it.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = {  # folder or file of the checkout → the glob patterns of what the wheel carries from it
    "runspecs": ["**/*.json"],
    "private_datasets/demo_commands": ["*.jsonl", "audio/*"],
    "config.yaml": [],
}


class BuildPyWithData(build_py):
    """build_py, then a copy of the shipped folders under lalmeval/_data/."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "lalmeval" / "_data"
        for name, patterns in SHIPPED.items():
            source = HERE / name
            files = [source] if not patterns else [p for pattern in patterns for p in sorted(source.glob(pattern)) if p.is_file()]
            if not files:
                raise SystemExit(f"error: {source}: nothing to ship (the wheel would lack it)")
            for file in files:
                dest = target / file.relative_to(HERE)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, dest)


setup(cmdclass={"build_py": BuildPyWithData})
