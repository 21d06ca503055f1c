"""OpenAI-compatible server for your own audio model: implement AudioModel, then serve it."""
