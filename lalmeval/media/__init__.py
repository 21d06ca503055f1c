"""Audio and image decoding, shared by the data readers and the model server."""
