"""The interface a served model implements; it lives in lalmeval.serve (import it from there).

Kept so that model classes written as `from models.inference_boilerplate.model import AudioModel`
go on working.
"""

from lalmeval.serve.model import Answer, AudioModel, ChatInput, ImageInput, Part, Reply, Segment, TranscriptionInput

__all__ = ["Answer", "AudioModel", "ChatInput", "ImageInput", "Part", "Reply", "Segment", "TranscriptionInput"]
