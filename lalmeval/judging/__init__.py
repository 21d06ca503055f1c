"""The LLM judge: what it is asked (templates), how it is called, and how its verdict is read."""
