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

from lalmeval.config import ModelInfo
from lalmeval.errors import UserError
from lalmeval.files import check_regular
from lalmeval.inference.replicas import ModelGroup
from lalmeval.secrets import NO_SECRETS, Redactor


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


def log_path(logdir: Path, model: ModelInfo) -> Path:
    """Where a launched server's output goes: launch_<name>.log in the run directory."""
    return logdir / f"launch_{model.name.replace('/', '_')}.log"


async def _answers(session: aiohttp.ClientSession, model: ModelInfo) -> bool:
    try:
        async with session.get(model.url.rstrip("/") + "/models", ssl=model.verify_ssl) as resp:
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

    async def on_demand(self, models: list[ModelInfo]) -> None:
        """Start servers the run did not launch up front, once, when a request turns out to be owed
        after all (a stored answer whose request changed). A failure is raised to every caller."""
        key = "\n".join(sorted({m.launch for m in models if m.launch}))  # the same for every request of a model group
        pending = [m for m in models if m.launch and m.launch not in self.processes]
        if key not in self._late:
            if not pending:
                return
            names = ", ".join(dict.fromkeys(m.name for m in pending))
            print(f"launching {names}: a stored answer no longer matches its request, so it is requested again", file=sys.stderr, flush=True)
            self._late[key] = asyncio.ensure_future(self._launch(pending, stop_on_failure=False))
        await asyncio.shield(self._late[key])

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _start(self, model: ModelInfo) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        process = await asyncio.create_subprocess_shell(
            model.launch, cwd=self.workdir, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
        )
        self.processes[model.launch] = process
        log = log_path(self.logdir, model)
        self._copiers.append(asyncio.ensure_future(self._copy(process, log)))

    async def _copy(self, process: asyncio.subprocess.Process, log: Path) -> None:
        """Drain the server's output into its log, scrubbed (servers print their arguments, an --api-key among them).

        Read in chunks, not lines: a progress bar that only writes '\r' would otherwise fill the pipe
        and stall the server. The tail of each chunk is held back so a secret split across two
        chunks is still found."""
        assert process.stdout is not None
        hold = max(0, self.redact.longest - 1)
        pending = b""
        try:
            handle: Optional[BinaryIO] = log.open("ab", buffering=0)
        except OSError as exc:  # drained all the same: the server would block on its pipe
            print(f"warning: cannot write {log}: {exc.strerror or exc}; the server's output is not kept", file=sys.stderr)
            handle = None
        try:
            while chunk := await process.stdout.read(1 << 16):
                pending = self.redact.bytes(pending + chunk)
                cut = max(0, len(pending) - hold)
                self._write_log(handle, pending[:cut])
                pending = pending[cut:]
            self._write_log(handle, self.redact.bytes(pending))
        finally:
            if handle is not None:
                handle.close()

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
                    raise UserError(f"model '{model.name}': {model.url} already answers before launch: another server holds the port (stop it, or remove `launch`)")

    async def _wait(self, model: ModelInfo) -> None:
        process = self.processes[model.launch]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + model.launch_timeout
        log = log_path(self.logdir, model)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            while loop.time() < deadline:
                if process.returncode is not None:
                    raise UserError(f"model '{model.name}': launch command exited with code {process.returncode} before {model.url} answered (log: {log})")
                if await _answers(session, model):
                    await asyncio.sleep(0.5)  # a server that lost the port race exits right after someone else answers
                    if process.returncode is None:
                        return
                    raise UserError(f"model '{model.name}': launch command exited with code {process.returncode} just as {model.url} answered: another server holds the port (log: {log})")
                await asyncio.sleep(0.3)
        raise UserError(f"model '{model.name}': {model.url} did not answer within {model.launch_timeout:g}s of launch (log: {log})")

    def kill_now(self) -> None:
        """Synchronously SIGKILL every launched process group (the process is about to exit)."""
        for process in self.processes.values():
            _signal(process, signal.SIGKILL)

    async def stop(self, grace: float = 10.0, only: Optional[set[str]] = None) -> None:
        """SIGTERM each process group (those of the `only` commands, if given), then SIGKILL what is
        still alive after `grace` seconds."""
        stopping = {cmd: proc for cmd, proc in self.processes.items() if only is None or cmd in only}
        for process in stopping.values():
            _signal(process, signal.SIGTERM)
        for process in stopping.values():
            try:
                await asyncio.wait_for(process.wait(), grace)
            except asyncio.TimeoutError:
                _signal(process, signal.SIGKILL)
                await process.wait()
        for cmd in stopping:
            del self.processes[cmd]
        if only is None:
            await asyncio.gather(*self._copiers, return_exceptions=True)
            self._copiers.clear()


def _signal(process: asyncio.subprocess.Process, sig: int) -> None:
    if process.returncode is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass

