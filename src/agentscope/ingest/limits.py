"""Limits of the OTLP receiver, apart from it so that the CLI can show them without loading its web stack."""

DEFAULT_MAX_BODY = 16 * 1024 * 1024
"""Largest request body the receiver accepts, in bytes after gzip."""
