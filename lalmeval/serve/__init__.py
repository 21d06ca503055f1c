"""`lalmeval serve`: an OpenAI-compatible HTTP server around any audio model.

Implement `AudioModel` (load, generate / transcribe, optionally their batched forms) and serve it
with `lalmeval serve --model my_module:MyModel`. Importing this package loads no model library,
and nothing at all until a name below is used.
"""

from typing import Any

__all__ = ["Answer", "AudioModel", "ChatInput", "ImageInput", "Part", "Reply", "Segment", "TranscriptionInput", "ApiError", "BadRequest", "Unsupported"]


def __getattr__(name: str) -> Any:
    if name in ("ApiError", "BadRequest", "Unsupported"):
        from lalmeval.serve import errors

        return getattr(errors, name)
    if name in __all__:
        from lalmeval.serve import model

        return getattr(model, name)
    raise AttributeError(f"module 'lalmeval.serve' has no attribute {name!r}")
