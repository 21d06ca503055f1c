"""lalmeval: evaluate audio language models served behind OpenAI-compatible endpoints."""

__version__ = "0.1.0"
