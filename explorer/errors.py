"""Every error meant for a person: its message says what went wrong and what to do. They live here, in one
module that imports nothing, so the modules that raise them never import each other for an exception."""

from __future__ import annotations


class UnsupportedConfigError(ValueError):
    """A checkpoint asks for an architecture feature this engine does not implement."""


class CheckpointError(RuntimeError):
    """A checkpoint could not be loaded; the message is meant for the person who asked for it."""


class PromptError(ValueError):
    """The prompt cannot be run; the message is meant for the person who typed it."""


class LimitError(RuntimeError):
    """A request would cost, or has cost, more than the app allows: the message names the limit and what
    to ask for instead (a shorter prompt, a higher threshold)."""


class StoppedError(RuntimeError):
    """Work stopped at the visitor's request (the page's Stop), between two of its steps: the message
    names the work."""
