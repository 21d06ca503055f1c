"""The floor for harness overhead: a minimal aiohttp client sending the requests lalmeval sends.

    python benchmarks/raw_client.py --data set.parquet --url http://127.0.0.1:8123/v1 [--concurrency 64]

It reads the parquet's audio column batch by batch, decodes each clip to 16-bit 16 kHz mono WAV in
threads, and POSTs the same chat-completions body (instruction, base64 WAV, temperature 0) with
`--concurrency` requests in flight. Nothing else: no selection, records, retries or scoring.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import time

import aiohttp
import numpy as np
import pyarrow.parquet as pq
import soundfile as sf
import soxr

INSTRUCTION = "Transcribe the audio."


def body(flac: bytes) -> bytes:
    data, rate = sf.read(io.BytesIO(flac), dtype="float32", always_2d=True)
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if rate != 16000:
        mono = soxr.resample(mono, rate, 16000)
    wav = io.BytesIO()
    sf.write(wav, np.clip(np.rint(mono * 32768.0), -32768, 32767).astype("<i2"), 16000, format="WAV", subtype="PCM_16")
    audio = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav.getvalue()).decode(), "format": "wav"}}
    message = {"role": "user", "content": [{"type": "text", "text": INSTRUCTION}, audio]}
    return json.dumps({"model": "bench", "messages": [message], "temperature": 0.0}).encode()


async def main(path: str, url: str, concurrency: int) -> None:
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(concurrency)
    answered = 0

    async def send(session: aiohttp.ClientSession, flac: bytes) -> None:
        nonlocal answered
        try:
            payload = await loop.run_in_executor(None, body, flac)
            async with session.post(url + "/chat/completions", data=payload, headers={"Content-Type": "application/json"}) as resp:
                reply = await resp.json()
            answered += bool(reply["choices"][0]["message"]["content"])
        finally:
            slots.release()

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = set()
        for batch in pq.ParquetFile(path).iter_batches(batch_size=64, columns=["audio"]):
            for clip in batch.column("audio").to_pylist():
                await slots.acquire()
                task = asyncio.ensure_future(send(session, clip["bytes"]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    print(json.dumps({"answered": answered, "finished": time.time()}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(main(args.data, args.url, args.concurrency))
