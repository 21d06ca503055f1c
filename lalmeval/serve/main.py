"""`lalmeval serve`: load a model, then answer OpenAI-compatible requests until stopped."""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import sys

from lalmeval.errors import UserError
from lalmeval.serve.builtin import BUILTIN  # names only: `lalmeval --help` imports no server code

KEY_ENV = "LALMEVAL_SERVE_API_KEY"
MAX_AUDIO_SECONDS = 3600.0  # as `lalmeval run`'s max_audio_seconds: 16 kHz float audio costs 230 MB an hour


def add_arguments(parser: argparse.ArgumentParser, default_model: str | None = None, default_port: int = 8000) -> None:
    """The options of `lalmeval serve` (and of python -m models.inference_boilerplate.server)."""
    parser.add_argument("--model", required=default_model is None, default=default_model,
                        help=f"a built-in model ({', '.join(BUILTIN)}), module:Class (an AudioModel subclass; the module is looked for in the current folder too) or path/to/file.py:Class")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=default_port, help=f"port to listen on (default: {default_port}; 0 picks a free one and prints it)")
    parser.add_argument("--served-model-name", action="append", metavar="NAME",
                        help="the model id clients send and GET /v1/models lists (repeat for aliases; default: the model's own name)")
    parser.add_argument("--max-batch-size", type=int, default=0, metavar="N", help="requests run together in one batch (default: the model's own)")
    parser.add_argument("--max-wait-ms", type=float, default=10.0, metavar="MS",
                        help="how long a batch waits for more requests once the model is free (default: 10)")
    parser.add_argument("--max-queue", type=int, default=256, metavar="N",
                        help="requests allowed to wait; one more is answered 503 with Retry-After (default: 256)")
    parser.add_argument("--api-key", default=None, metavar="KEY",
                        help=f"require this key (Authorization: Bearer KEY) of every request but GET /health; default: ${KEY_ENV} "
                             "when set (better: a command line is visible to every user of the machine)")
    parser.add_argument("--max-body-mb", type=int, default=256, metavar="MB", help="largest request body; a larger one is answered 413 (default: 256)")
    parser.add_argument("--max-audio-seconds", type=float, default=MAX_AUDIO_SECONDS, metavar="S",
                        help=f"longest audio a request may carry, all its clips together; read from each clip's header before decoding, "
                             f"a longer one is answered 400 (default: {MAX_AUDIO_SECONDS:g})")


def _listen(host: str, port: int) -> socket.socket:
    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, reuse_port=False)
    except OSError as exc:  # socket.create_server's strerror repeats the address: the system's reason is enough
        reason = (exc.strerror or str(exc)).split(" (while attempting to bind")[0]
        raise UserError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(False)
    return sock


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def check_arguments(args: argparse.Namespace) -> None:
    """Every value the server cannot work with, refused in one line before anything loads."""
    from lalmeval.serve.loading import model_id_problem

    for name, value, least in (("--max-batch-size", args.max_batch_size, 0), ("--max-queue", args.max_queue, 1),
                               ("--max-body-mb", args.max_body_mb, 1), ("--max-wait-ms", args.max_wait_ms, 0)):
        if not math.isfinite(value) or value < least:  # inf would wait for ever for a batch to fill; nan compares false
            raise UserError(f"{name} must be a number from {least}, not {value:g}")
    if not math.isfinite(args.max_audio_seconds) or args.max_audio_seconds <= 0:
        raise UserError(f"--max-audio-seconds must be a number above 0, not {args.max_audio_seconds:g}")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be from 0 to 65535, not {args.port}")
    for name in args.served_model_name or ():
        problem = model_id_problem(name)
        if problem:
            raise UserError(f"--served-model-name {name!r} is not a model id clients can send ({problem}): e.g. --served-model-name my-model")


def _api_key(given: str | None) -> str | None:
    """The key to require (None: none); an empty one, which would leave the server open, is refused."""
    where, key = ("--api-key", given) if given is not None else (f"${KEY_ENV}", os.environ.get(KEY_ENV))
    if key is None:
        return None
    if not key.strip():
        raise UserError(f"{where} is empty (an unset variable?): give the key, or leave {where} out to serve without one")
    if key != key.strip() or not key.isprintable():
        raise UserError(f"{where} has spaces at its ends or unprintable characters, which no client sends in a header: give the key alone")
    return key


def serve(args: argparse.Namespace) -> int:
    """Load the model, open the port, serve until SIGINT/SIGTERM."""
    from aiohttp import web

    from lalmeval.serve.app import Limits, make_app
    from lalmeval.serve.errors import json_protocol_errors
    from lalmeval.serve.loading import load_model
    from lalmeval.serve.runtime import Runner

    check_arguments(args)
    if args.port:
        _listen(args.host, args.port).close()  # a port in use is said now, not after minutes of loading weights
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # `--model my_model:MyModel` finds my_model.py where the command runs
    api_key = _api_key(args.api_key)
    model = load_model(args.model)
    runner = Runner(args.model, model)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM while loading: the workers are stopped, as on Ctrl-C
    try:
        runner.load()
        sock = _listen(args.host, args.port)  # only now: whoever waits for the port finds a model that answers
    except BaseException:
        runner.close()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    port = sock.getsockname()[1]
    ids = tuple(dict.fromkeys(args.served_model_name or [model.name]))
    limits = Limits(args.max_body_mb, args.max_batch_size, args.max_wait_ms, args.max_queue, args.max_audio_seconds, api_key)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    ready = (f"serving {', '.join(ids)} on http://{shown}:{port}/v1 (batches of up to {limits.max_batch or model.max_batch_size}, "
             f"{runner.workers} at a time{', API key required' if api_key else ''})")
    json_protocol_errors(api_key)
    web.run_app(make_app(runner, ids, limits), sock=sock, print=lambda *_: print(ready, flush=True), access_log=None,
                handler_cancellation=True)  # a client that goes away takes its waiting requests with it
    if runner.abandoned:  # a model thread still in a batch cannot be stopped, and Python's exit would wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
