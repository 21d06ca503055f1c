"""A fresh clone: the README's Quick start and Tests commands work from a bare shell, in either order.

A full set-up (a new venv, ~90 packages) takes minutes and needs the package index, so it is
not repeated here: the suite itself runs inside the venv that `bash test.sh` set up, and these
tests check that the README, CI and both scripts go through that one set-up, that the venv
holds exactly the pinned versions, and that what the scripts print runs as printed from a shell
with nothing activated.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import REPO, demo_rows, model

SETUP = "scripts/setup-venv.sh"
BARE_ENV = {"HOME": os.environ.get("HOME", "/tmp"), "PATH": "/usr/bin:/bin"}  # no venv, no python of ours


def readme_command(section: str) -> str:
    """The first command of the first code block under a README heading."""
    text = (REPO / "README.md").read_text()
    body = text.split(f"\n## {section}", 1)[1]
    block = re.search(r"```bash\n(.*?)```", body, re.DOTALL).group(1)
    return block.strip().splitlines()[0]


def script_of(command: str) -> Path:
    words = shlex.split(command)
    assert words[0] == "bash" and len(words) == 2, f"{command!r} is not `bash <script>`"
    return REPO / words[1]


def test_ci_runs_the_readme_test_command():
    tests = readme_command("Tests")
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert tests in lines, f".ci/run does not run the README's test command {tests!r}"
    assert not any(re.match(r"(python3? -m )?pytest", line) for line in lines), "CI must not run pytest around the README's command"


def test_quick_start_and_tests_set_up_the_same_venv_through_one_script():
    for section in ("Quick start (offline)", "Tests"):
        script = script_of(readme_command(section)).read_text()
        assert f'source "$(dirname "${{BASH_SOURCE[0]}}")/{SETUP}"' in script, f"{section}: does not source {SETUP}"
    setup = (REPO / SETUP).read_text()
    assert 'pip install --disable-pip-version-check -c "$root/constraints.txt" -r "$root/requirements.txt"' in setup
    assert 'pip install --disable-pip-version-check -c "$root/constraints.txt" -e "$root"' in setup
    assert "--quiet" not in setup and " -q " not in setup  # a minute of silence looks like a hang


def venv_ready() -> bool:
    return subprocess.run(["bash", str(REPO / SETUP), "--check"], env=BARE_ENV, timeout=60).returncode == 0


@pytest.fixture
def set_up():
    """The venv the README's commands use; the suite normally runs inside it (bash test.sh)."""
    if not venv_ready():
        if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
            pytest.fail(f"{REPO / '.venv'} is not set up although CI ran the suite through the README's test command")
        pytest.skip("run through `bash test.sh`: .venv/ is not set up (or out of date) and setting it up takes a minute")


def bare(command: str, cwd: Path, timeout: int = 300, path: str = BARE_ENV["PATH"]) -> subprocess.CompletedProcess:
    env = {**BARE_ENV, "PATH": path}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_readme_commands_work_from_a_shell_with_nothing_activated(set_up, tmp_path):
    tests = bare(f"{readme_command('Tests')} --collect-only -q tests/test_cli.py", REPO)
    assert tests.returncode == 0 and "test_cli.py" in tests.stdout, tests.stdout + tests.stderr
    run = bare(f"{readme_command('Quick start (offline)')} --help", REPO)
    assert run.returncode == 0 and "usage: lalmeval run" in run.stdout, run.stderr
    # From another directory, through the script's path, with paths relative to that directory.
    (tmp_path / "c.yaml").write_text("dataset_metric: [[demo_commands, word_eror_rate]]\nmodels: [{name: m, url: 'http://127.0.0.1:9/v1', model: m}]\n")
    elsewhere = bare(f"bash {REPO / 'evaluate.sh'} --config c.yaml", tmp_path)
    assert elsewhere.returncode == 2 and "c.yaml: dataset_metric[0]: unknown metric" in elsewhere.stderr, elsewhere.stderr


def other_python() -> tuple[str, str]:
    """(version, path) of an installed supported Python other than the running one."""
    for version in SUPPORTED:
        if version != "%d.%d" % sys.version_info[:2]:
            found = subprocess.run(["bash", str(REPO / "scripts" / "find-python.sh"), version], capture_output=True, text=True, timeout=60)
            if found.returncode == 0:
                return version, found.stdout.strip()
    if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
        pytest.fail("CI has no second Python of 3.10 to 3.13 (scripts/find-python.sh found none)")
    pytest.skip("no second Python of 3.10 to 3.13 is installed here")


def test_lalmeval_python_of_another_version_makes_the_set_up_due_and_a_bad_one_is_one_line(set_up):
    def check(python: str) -> subprocess.CompletedProcess:
        env = {**BARE_ENV, "LALMEVAL_PYTHON": python}
        return subprocess.run(["bash", str(REPO / SETUP), "--check"], env=env, capture_output=True, text=True, timeout=60)

    assert check(sys.executable).returncode == 0 and check("%d.%d" % sys.version_info[:2]).returncode == 0
    version, path = other_python()
    assert check(path).returncode == 1 and check(version).returncode == 1  # a path or a version: the venv would be made anew
    for bad, says in [(str(REPO / "no-such-python"), "does not start"), ("/bin/true", "does not start"), ("3.9", "3.9")]:
        out = check(bad)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and says in out.stderr, out.stderr


def test_the_set_up_is_due_again_when_a_pinned_version_changes(set_up, tmp_path):
    for name in ("requirements.txt", "constraints.txt", "pyproject.toml", SETUP, "scripts/find-python.sh"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    check = lambda: subprocess.run(["bash", str(tmp_path / SETUP), "--check"], env=BARE_ENV, timeout=60).returncode  # noqa: E731
    assert check() == 0
    with (tmp_path / "constraints.txt").open("a") as handle:
        handle.write("six==0.1\n")
    assert check() == 1


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pin_lines() -> list:
    """Every line of constraints.txt as a Requirement (name, ==version, optional python_version marker)."""
    from packaging.requirements import Requirement

    lines = (REPO / "constraints.txt").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def pins(python_version: str = "%d.%d" % sys.version_info[:2]) -> dict[str, str]:
    """name → the version constraints.txt pins for that Python (markers evaluated)."""
    out: dict[str, str] = {}
    for req in pin_lines():
        if req.marker is None or req.marker.evaluate({"python_version": python_version}):
            assert canonical(req.name) not in out, f"constraints.txt: two pins of {req.name} hold for Python {python_version}"
            (spec,) = req.specifier
            out[canonical(req.name)] = spec.version
    return out


SUPPORTED = ("3.10", "3.11", "3.12", "3.13")


def test_constraints_pin_one_exact_version_of_each_package_for_every_supported_python():
    lines = pin_lines()
    assert all(len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==" for req in lines)
    assert all(req.marker is None or "python_version" in str(req.marker) for req in lines), "only python_version markers"
    names = {canonical(req.name) for req in lines}
    for version in SUPPORTED:
        assert set(pins(version)) == names, f"Python {version}: a package has no pin"
    # The per-Python lines exist because the versions differ: numpy 2.4 has no wheel for 3.10.
    assert pins("3.10")["numpy"] != pins("3.11")["numpy"] and "meeteval" not in names and "cython" not in names


def pulled_in() -> set[str]:
    """Every distribution requirements.txt and requirements-test.txt install here: their lines, their dependencies, and theirs."""
    from packaging.requirements import Requirement

    lines = [line for name in ("requirements.txt", "requirements-test.txt")
             for line in (REPO / name).read_text().splitlines() if line.strip() and not line.startswith("#")]
    todo, seen = [(Requirement(line), {""}) for line in lines], set()
    while todo:
        req, wanted_by = todo.pop()
        if req.marker and not any(req.marker.evaluate({"extra": extra}) for extra in wanted_by):
            continue
        key = (canonical(req.name), frozenset(req.extras))  # sacrebleu and sacrebleu[ja] pull in different things
        if key in seen:
            continue
        seen.add(key)
        extras = {""} | set(req.extras)
        todo += [(Requirement(dep), extras) for dep in metadata.requires(req.name) or []]
    return {name for name, _ in seen}


def test_constraints_pin_everything_requirements_pull_in_at_the_installed_version(set_up):
    if Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        pytest.skip("the suite is not running inside .venv/ (run it with `bash test.sh`)")
    pinned = pins()
    unpinned = sorted(pulled_in() - set(pinned))
    assert not unpinned, f"not pinned in constraints.txt (regenerate it, see its header): {unpinned}"
    for name in pulled_in():
        assert metadata.version(name) == pinned[name], name


def test_every_pin_installs_on_the_first_patch_release_of_its_python():
    """A pin for Python X.Y must install on any X.Y (Debian 12's python3 is 3.11.2): pymdown-extensions 13
    wants 3.11.5, so a `python_version >= "3.11"` pin of it broke `bash test.sh` there. Read from the
    Requires-Python of each installed distribution that is at its pinned version."""
    from packaging.specifiers import SpecifierSet

    first = "%d.%d.0" % sys.version_info[:2]
    pinned = pins()
    at_pin = [d for d in metadata.distributions() if pinned.get(canonical(d.metadata["Name"])) == d.version]
    assert len(at_pin) > 20, "too few pinned distributions installed to check"
    too_new = [f"{d.metadata['Name']}=={d.version} (Requires-Python {d.metadata['Requires-Python']})" for d in at_pin
               if d.metadata["Requires-Python"] and not SpecifierSet(d.metadata["Requires-Python"]).contains(first, prereleases=True)]
    assert not too_new, f"constraints.txt pins for Python {first[:-2]} releases that refuse Python {first}: {too_new}"


def failing_twice(seen, n):
    return Reply(status=400, payload={"error": {"message": "not yet"}}) if n < 2 else "ok"


VENV_BIN = REPO / ".venv" / "bin"
STARTS = {  # how the run is started → (the words typed, PATH of the shell)
    "evaluate.sh from elsewhere": (f"bash {REPO / 'evaluate.sh'}", BARE_ENV["PATH"]),
    "python -m, by path": (f"{VENV_BIN / 'python'} -m lalmeval run", BARE_ENV["PATH"]),
    "lalmeval, by path": (f"{VENV_BIN / 'lalmeval'} run", BARE_ENV["PATH"]),
    "python -m, activated": ("python -m lalmeval run", f"{VENV_BIN}:{BARE_ENV['PATH']}"),
    "lalmeval, activated": ("lalmeval run", f"{VENV_BIN}:{BARE_ENV['PATH']}"),
}


@pytest.mark.parametrize("how", STARTS)
def test_the_printed_retry_command_runs_as_printed(set_up, ws, how):
    rows = ws.copy_demo_audio(demo_rows(3))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    start, path = STARTS[how]
    with ScriptedEndpoint(failing_twice) as ep:
        ws.config([model(ep.url, retry_attempts=0)], [["cmds", "word_error_rate"]])
        first = bare(f"{start} --config config.yaml --run-id r", ws.root, path=path)
        assert first.returncode == 3, first.stderr
        printed = first.stderr.split("Retry them with: ", 1)[1].strip()
        assert printed == f"{start} --config config.yaml --output-dir runs --resume r"
        again = bare(printed, ws.root, path=path)  # pasted into the same shell
        assert again.returncode == 0, again.stderr
        assert len(ep.requests) == 5  # only the two failed samples were requested again


def test_pin_versions_merges_one_line_where_pythons_agree_and_a_range_per_version_where_they_differ():
    from scripts.pin_versions import merge

    frozen = {"3.10": {"numpy": ("numpy", "2.2.6"), "tomli": ("tomli", "2.5.0"), "six": ("six", "1.17.0")},
              "3.11": {"numpy": ("numpy", "2.4.6"), "six": ("six", "1.17.0")},
              "3.12": {"numpy": ("numpy", "2.5.5"), "six": ("six", "1.17.0"), "pocketsphinx": ("pocketsphinx", "5.0.4")},
              "3.13": {"numpy": ("numpy", "2.5.5"), "six": ("six", "1.17.0"), "pocketsphinx": ("pocketsphinx", "5.1.1")}}
    assert merge(frozen) == [
        'numpy==2.2.6; python_version < "3.11"',
        'numpy==2.4.6; python_version >= "3.11" and python_version < "3.12"',
        'numpy==2.5.5; python_version >= "3.12"',
        'pocketsphinx==5.0.4; python_version < "3.13"',  # the first range reaches down to any older Python
        'pocketsphinx==5.1.1; python_version >= "3.13"',
        "six==1.17.0",
        "tomli==2.5.0",  # needed by one Python only: a pin elsewhere is never used
    ]
