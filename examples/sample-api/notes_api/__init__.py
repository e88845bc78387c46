"""notes_api: a small JSON HTTP API for personal notes."""

__version__ = "0.3.0"
