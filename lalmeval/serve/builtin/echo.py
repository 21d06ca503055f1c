"""`--model echo`: answers with a JSON account of what reached the model, to check a client's requests."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from lalmeval.serve.model import AudioModel, ChatInput, ImageInput, Part


def account(part: Part) -> dict[str, Any]:
    """What one input was: text as is, a clip by its length, an image by type, size and SHA-1."""
    if isinstance(part, str):
        return {"text": part}
    if isinstance(part, np.ndarray):
        return {"audio_seconds": round(len(part) / 16000, 3)}
    assert isinstance(part, ImageInput)
    detail = {"detail": part.detail} if part.detail else {}
    if part.bytes is None:
        return {"image_url": part.url, **detail}
    return {"image": part.mime, "bytes": len(part.bytes), "sha1": hashlib.sha1(part.bytes).hexdigest(), **detail}


class EchoInputs(AudioModel):
    """Replies {"system": ..., "parts": [...]}, one entry per text, clip and image, in the order sent."""

    name = "echo-inputs"
    concurrency = 2
    max_batch_size = 8
    takes_images = True

    def generate(self, request: ChatInput) -> str:
        return json.dumps({"system": request.system, "parts": [account(p) for p in request.parts]})
