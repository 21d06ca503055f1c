"""A scripted endpoint that streams spoken chat replies as OpenAI does (SSE deltas), with known delays."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np
from aiohttp import web

from tests.support.endpoint import ScriptedEndpoint


def tone(seconds: float, rate: int = 24000) -> bytes:
    """pcm16 of a 440 Hz tone: audio whose every sample a test can compare."""
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 440 * t) * 12000).astype("<i2").tobytes()


def pieces(data: bytes, sizes: tuple[int, ...] = (1000, 2001, 4000)) -> list[str]:
    """`data` as base64 pieces of uneven sizes, so that some end in padding, as a server may send them."""
    out, at, i = [], 0, 0
    while at < len(data):
        size = sizes[i % len(sizes)]
        out.append(base64.b64encode(data[at:at + size]).decode())
        at, i = at + size, i + 1
    return out


class StreamingEndpoint(ScriptedEndpoint):
    """Answers every streamed chat request with the words of `answer(seen)` after `first_token` seconds, then its
    audio (a tone of `audio_seconds`) after `first_audio` seconds, then [DONE] after `end` seconds."""

    def __init__(self, answer, first_token: float, first_audio: float, end: float, audio_seconds: float = 1.0):
        super().__init__()
        self.answer, self.first_token, self.first_audio, self.end = answer, first_token, first_audio, end
        self.audio = tone(audio_seconds)
        # reply text -> (first text, first audio) as they were written, in seconds after the request came in: the delays
        # this endpoint really kept (a test process's own stalls, which it shares with the run, can make them longer)
        self.kept: dict[str, tuple[float, float]] = {}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        arrived = asyncio.get_running_loop().time()
        seen = await self._parse(request)
        self.requests.append(seen)
        if not (seen.body or {}).get("stream"):
            return web.json_response({"error": {"message": "this endpoint only streams"}}, status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        started = asyncio.get_running_loop().time()

        async def send(at: float, delta: dict[str, Any], **more: Any) -> None:
            await asyncio.sleep(max(0.0, started + at - asyncio.get_running_loop().time()))
            chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}], **more}
            await response.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())

        await send(0.0, {"role": "assistant", "content": None, "audio": {"id": "audio_1", "transcript": ""}})
        words = self.answer(seen).split(" ")
        for i, word in enumerate(words):
            await send(self.first_token, {"audio": {"transcript": (" " if i else "") + word}})
            if not i:
                first_text = asyncio.get_running_loop().time() - arrived
        for i, piece in enumerate(pieces(self.audio)):
            await send(self.first_audio, {"audio": {"data": piece}})
            if not i:
                self.kept[" ".join(words)] = (first_text, asyncio.get_running_loop().time() - arrived)
        await send(self.end, {}, usage={"prompt_tokens": 3, "completion_tokens": 40, "total_tokens": 43})
        await response.write(b"data: [DONE]\r\n\r\n")
        await response.write_eof()
        return response
