"""The picker's "Remote (NDIF)" source: models NDIF runs, offered only where the operator asked for them
by setting both NDIF_API_KEY (the key every remote run is sent with) and EXPLORER_REMOTE=1. A public
Space that sets neither offers nothing remote, and a typed "ndif:" source is refused there.

A remote choice's source is "ndif:<hub id>"; the workspace loads it with
`explorer.load(<hub id>, backend="nnsight", remote=True)` (`explorer.nnsight_backend`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from explorer.engine.tokens import encode

PREFIX = "ndif:"
SWITCH = "EXPLORER_REMOTE"
KEY = "NDIF_API_KEY"
CHOICES = tuple(  # models NDIF has served to nnsight's users; the operator may type another hub id
    (f"Remote (NDIF): {name}", f"{PREFIX}{name}")
    for name in ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B")
)
REFUSED = f"Remote models run on NDIF only where this app's operator sets {KEY} and {SWITCH}=1."


def offered(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the operator asked for remote models: NDIF_API_KEY set and EXPLORER_REMOTE=1."""
    return bool(environ.get(KEY, "").strip()) and environ.get(SWITCH, "").strip() == "1"


def model_of(source: str) -> str | None:
    """The hub id a remote source names ("ndif:org/name" -> "org/name"), or None for any other."""
    text = source.strip()
    return text[len(PREFIX) :].strip() if text.startswith(PREFIX) else None


def estimate_note(explorer, text, max_tokens: int) -> str:
    """What a run of `text` will move back from NDIF, said before it is sent ('' where the model runs
    in this process, or `text` is no prompt: a generation's key)."""
    model = explorer.model
    if not getattr(model, "remote", False) or not isinstance(text, str):  # our engine's model: never remote
        return ""
    limit = min(max_tokens, explorer.config.context_length)
    n_tokens = len(encode(explorer.tokenizer, text, limit).ids)
    return (
        f"This run sends {n_tokens:,} tokens to NDIF and moves about "
        f"{model.estimate_bytes(n_tokens) / 1e6:,.1f} MB back ({explorer.runs_where})."
    )


def moved_note(run) -> str:
    """What a run's status line adds where nnsight ran its forward: where it ran and what it moved
    ('' for a run of our own engine)."""
    explorer = run.explorer
    if explorer.backend == "engine":
        return ""
    return f" Run {explorer.runs_where}: {run.moved_bytes / 1e6:,.2f} MB moved back from the model."
