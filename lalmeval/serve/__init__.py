"""`lalmeval serve`: an OpenAI-compatible HTTP server around any audio model.

Implement `AudioModel` (load, generate / transcribe, optionally their batched forms) and serve it
with `lalmeval serve --model my_module:MyModel`. Importing this package loads no model library.
"""

from lalmeval.serve.model import AudioModel, ChatInput, ImageInput, Part, Reply, Segment, TranscriptionInput

__all__ = ["AudioModel", "ChatInput", "ImageInput", "Part", "Reply", "Segment", "TranscriptionInput"]
