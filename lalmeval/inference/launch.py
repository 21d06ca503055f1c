"""Start the servers named by `launch`, wait until they answer, stop them at the end."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import BinaryIO, Optional

import aiohttp

from urllib.parse import urlsplit

from lalmeval.config.schema import ModelInfo
from lalmeval.errors import LaunchFailed
from lalmeval.files import check_regular
from lalmeval.inference.replicas import ModelGroup
from lalmeval.inference.urls import endpoint_url
from lalmeval.config.secrets import NO_SECRETS, USERINFO_HOLD, Redactor
from lalmeval.results.store import file_name


def launch_list(groups: list[ModelGroup]) -> list[ModelInfo]:
    """One launch per replica that has a command: {replica} and {port} filled in, a log name of its own."""
    out = []
    for group in groups:
        for replica in group.replicas:
            info = replica.info
            if not info.launch:
                continue
            port = urlsplit(info.url).port
            command = info.launch.replace("{replica}", str(replica.index)).replace("{port}", str(port) if port else "")
            name = f"{group.name}-replica{replica.index}" if len(group.replicas) > 1 else group.name
            out.append(info.model_copy(update={"launch": command, "name": name}))
    return out


def launch_environment() -> dict[str, str]:
    """The environment of a launch command: this one, with the folder of the running Python first on PATH,
    so `lalmeval serve ...` and `python ...` in a config run this environment's, from any folder."""
    here = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if not here or path.split(os.pathsep)[0] == here:
        return dict(os.environ)
    return {**os.environ, "PATH": here + (os.pathsep + path if path else "")}


def log_path(logdir: Path, model: ModelInfo) -> Path:
    """Where a launched server's output goes: launch_<name>.log in the run directory (a file-safe name)."""
    return logdir / file_name([model.name], ".log", prefix="launch_")


async def _answers(session: aiohttp.ClientSession, model: ModelInfo) -> bool:
    try:
        async with session.get(endpoint_url(model.url, "/models"), ssl=model.verify_ssl, allow_redirects=False) as resp:
            return resp.status < 500
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return False


class Launcher:
    """Async context manager owning the processes of every model with a `launch` command."""

    def __init__(self, models: list[ModelInfo], workdir: Path, logdir: Path, redactor: Redactor = NO_SECRETS):
        self.models = [m for m in models if m.launch]
        self.workdir = workdir
        self.logdir = logdir
        self.redact = redactor
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self._copiers: list[asyncio.Task] = []
        self._copier_of: dict[str, asyncio.Task] = {}   # launch command → the task copying its output to its log
        self._pipes: list[asyncio.subprocess.Process] = []   # whose stdout pipe we still hold open
        self._late: dict[str, asyncio.Future] = {}   # launch command -> its on-demand start

    async def __aenter__(self) -> "Launcher":
        await self._launch(self.models)
        return self

    async def _launch(self, models: list[ModelInfo], stop_on_failure: bool = True) -> None:
        """Start `models` (each command once) and wait until every one answers; on failure stop them all
        (a late start stops only its own: the servers launched up front are in use)."""
        for model in models:  # before anything starts: opening a named pipe would block the loop
            check_regular(log_path(self.logdir, model), "launch log")
        await self._check_ports_free(models)
        started: dict[str, ModelInfo] = {}
        for model in models:
            if model.launch not in started:  # two entries may share one server
                started[model.launch] = model
                await self._start(model)
        try:
            await asyncio.gather(*(self._wait(m) for m in models))
        except BaseException:
            await self.stop(only=None if stop_on_failure else set(started))
            raise

    async def on_demand(self, models: list[ModelInfo], why: str = "a stored answer no longer matches its request, so it is requested again") -> None:
        """Start servers the run did not launch up front, once, when a request turns out to be owed
        after all (a stored answer whose request changed). A failure is raised to every caller."""
        key = "\n".join(sorted({m.launch for m in models if m.launch}))  # the same for every request of a model group
        pending = [m for m in models if m.launch and m.launch not in self.processes]
        if key not in self._late:
            if not pending:
                return
            names = ", ".join(dict.fromkeys(m.name for m in pending))
            print(f"launching {names}: {why}", file=sys.stderr, flush=True)
            self._late[key] = asyncio.ensure_future(self._launch(pending, stop_on_failure=False))
        await asyncio.shield(self._late[key])

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _start(self, model: ModelInfo) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        process = await asyncio.create_subprocess_shell(
            model.launch, cwd=self.workdir, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, start_new_session=True, env=launch_environment(),
        )
        self.processes[model.launch] = process
        self._pipes.append(process)
        log = log_path(self.logdir, model)
        self._copiers.append(asyncio.ensure_future(self._copy(process, log)))
        self._copier_of[model.launch] = self._copiers[-1]

    async def _copy(self, process: asyncio.subprocess.Process, log: Path) -> None:
        """Drain the server's output into its log, scrubbed (servers print their arguments, an --api-key among them).

        Read in chunks, not lines: a progress bar that only writes '\r' would otherwise fill the pipe
        and stall the server. The last word of each chunk is held back, so a URL's `user:password@`
        split across two chunks is still found (a key split anywhere is: its two parts are its start
        and its end, which the redactor hides on their own)."""
        assert process.stdout is not None
        hold = max(USERINFO_HOLD, self.redact.longest - 1)
        pending = b""
        try:
            handle: Optional[BinaryIO] = log.open("ab", buffering=0)
        except OSError as exc:  # drained all the same: the server would block on its pipe
            print(f"warning: cannot write {log}: {exc.strerror or exc}; the server's output is not kept", file=sys.stderr)
            handle = None
        try:
            while chunk := await process.stdout.read(1 << 16):
                pending = self.redact.bytes(pending + chunk)
                cut = len(pending) - _last_word(pending, hold)
                self._write_log(handle, pending[:cut])
                pending = pending[cut:]
        finally:
            self._write_log(handle, self.redact.bytes(pending))
            if handle is not None:
                handle.close()

    async def _said_last(self, model: ModelInfo, log: Path) -> str:
        """': <the last line the exited server wrote>' (its reason, usually), once its output is in the log; '' when it said nothing."""
        copier = self._copier_of.get(model.launch)
        if copier is not None:
            await asyncio.wait([copier], timeout=1.0)
        try:
            with log.open("rb") as handle:
                handle.seek(max(0, handle.seek(0, 2) - 8192))
                tail = handle.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.replace("\r", "\n").split("\n") if line.strip()]
        return f": {lines[-1][:300]}" if lines else ""

    @staticmethod
    def _write_log(handle: Optional[BinaryIO], data: bytes) -> None:
        try:
            if handle is not None:
                handle.write(data)
        except OSError:
            pass  # a full disk must not stop the drain: the server would block on its pipe

    async def _check_ports_free(self, models: list[ModelInfo]) -> None:
        """A server already answering at a launch URL would be evaluated in place of the launched one."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            for model in models:
                if await _answers(session, model):
                    raise LaunchFailed(f"model '{model.name}': {model.url} already answers before launch: another server holds the port (stop it, or remove `launch`)")

    async def _wait(self, model: ModelInfo) -> None:
        process = self.processes[model.launch]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + model.launch_timeout
        log = log_path(self.logdir, model)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while loop.time() < deadline:
                if process.returncode is not None:
                    # Exit code 0 this early is a command that put its server in the background and returned.
                    hint = (": the command must run the server in the foreground (no trailing &, nohup or daemon mode) so the "
                            "run can stop it") if process.returncode == 0 else await self._said_last(model, log)
                    raise LaunchFailed(f"model '{model.name}': launch command exited with code {process.returncode} before {model.url} "
                                       f"answered{hint} (log: {log})")
                if await _answers(session, model):
                    await asyncio.sleep(0.5)  # a server that lost the port race exits right after someone else answers
                    if process.returncode is None:
                        return
                    raise LaunchFailed(f"model '{model.name}': launch command exited with code {process.returncode} just as {model.url} answered: another server holds the port, "
                                       f"or the command starts its server in the background and returns (it must stay in the foreground "
                                       f"for the run to stop it: no trailing &, nohup or daemon mode) (log: {log})")
                await asyncio.sleep(0.3)
        raise LaunchFailed(f"model '{model.name}': {model.url} did not answer within {model.launch_timeout:g}s of launch (log: {log})")

    def kill_now(self) -> None:
        """Synchronously SIGKILL every launched process group and its known descendants (the process is about to exit)."""
        for process in self.processes.values():
            _signal(process, signal.SIGKILL, descendants(process.pid))

    async def stop(self, grace: float = 10.0, only: Optional[set[str]] = None) -> None:
        """SIGTERM each process group (those of the `only` commands, if given) and every process it started
        in a session of its own, then SIGKILL what is still alive after `grace` seconds."""
        stopping = {cmd: proc for cmd, proc in self.processes.items() if only is None or cmd in only}
        await asyncio.gather(*(self._stop_one(process, grace) for process in stopping.values()))
        for cmd in stopping:
            del self.processes[cmd]
        if only is None:
            await self._drain_copiers()

    async def _stop_one(self, process: asyncio.subprocess.Process, grace: float) -> None:
        # Found before any signal: once the server dies its children are orphans, no longer traceable to it.
        escaped = descendants(process.pid)
        _signal(process, signal.SIGTERM, escaped)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while _alive(process, escaped) and loop.time() < deadline:
            await asyncio.sleep(0.1)
        _signal(process, signal.SIGKILL, escaped)  # whatever ignored SIGTERM, the group's stragglers included
        await process.wait()

    async def _drain_copiers(self, grace: float = 2.0) -> None:
        """Let the log copiers read what is left; a process that escaped the group (double fork, setsid) may
        hold the pipe open for ever, so after `grace` seconds our end is closed instead of waiting for EOF."""
        copiers, self._copiers = self._copiers, []
        if not copiers:
            return
        _, pending = await asyncio.wait(copiers, timeout=grace)
        for task in pending:
            task.cancel()
        for process in self._pipes:
            transport = getattr(process, "_transport", None)
            pipe = transport.get_pipe_transport(1) if transport is not None else None
            if pipe is not None:
                pipe.close()
        self._pipes.clear()
        await asyncio.gather(*pending, return_exceptions=True)


def _last_word(data: bytes, limit: int) -> int:
    """Length of the text after the last space or line break of `data`, at most `limit`."""
    last = max(data.rfind(b" "), data.rfind(b"\n"), data.rfind(b"\r"), data.rfind(b"\t"))
    return min(limit, len(data) - last - 1)


def _processes() -> Optional[dict[int, tuple[str, int, int]]]:
    """pid → (state, parent pid, process group) of every process, from /proc; None where there is no /proc."""
    try:
        names = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    table = {}
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()  # the command name may hold spaces and ')'
            table[int(name)] = (fields[0].decode(), int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return table


def descendants(pid: int) -> list[int]:
    """Every process started by `pid`, at any depth, whatever its process group or session."""
    children: dict[int, list[int]] = {}
    for child, (_, parent, _) in (_processes() or {}).items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _alive(process: asyncio.subprocess.Process, others: list[int]) -> bool:
    """Whether the server, anything left in its process group, or one of `others` still runs (zombies do not)."""
    if process.returncode is None:
        return True
    table = _processes()
    if table is None:  # no /proc: the group answers as long as any member exists
        try:
            os.killpg(process.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    wanted = set(others)
    return any((group == process.pid or pid in wanted) and state not in "ZX" for pid, (state, _, group) in table.items())


def _signal(process: asyncio.subprocess.Process, sig: int, others: list[int] = ()) -> None:
    """Send `sig` to the server's process group (alive as long as any member is, even once the server
    has exited) and to `others`, its descendants that left the group."""
    targets = [lambda: os.killpg(process.pid, sig)] + [lambda p=p: os.kill(p, sig) for p in others]
    for send in targets:
        try:
            send()
        except (ProcessLookupError, PermissionError):
            pass
