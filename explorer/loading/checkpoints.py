"""Load a checkpoint: the bundled model, a Hugging Face-layout folder (`folders`), a GGUF file (`gguf`:
a .gguf file, or one of another name that starts with GGUF's magic bytes, as Ollama's blobs do) or a
hub id (`hub`, downloaded into a folder). Every way loading can fail ends in one `CheckpointError`
whose message says what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from explorer.engine.config import brief
from explorer.errors import CheckpointError
from explorer.loading import gguf, hub
from explorer.loading.folders import load_folder
from explorer.loading.gguf_header import MAGIC
from explorer.loading.weights import Checkpoint, Fits

# A checkout holds the bundled model in assets/; an installed wheel inside the package (pyproject.toml).
INSTALLED_MODEL = Path(__file__).resolve().parents[1] / "bundled"
BUNDLED_MODEL = (
    INSTALLED_MODEL
    if INSTALLED_MODEL.is_dir()
    else Path(__file__).resolve().parents[2] / "assets" / "shakespeare-gqa"
)


def resolve(source: str | Path | None) -> Path:
    """A local directory for `source`: the bundled model, an existing directory, or a hub download."""
    if source is None or str(source).strip() == "":
        if not BUNDLED_MODEL.is_dir():
            raise CheckpointError(f"The bundled model is missing from {BUNDLED_MODEL}.")
        return BUNDLED_MODEL
    source = str(source).strip()
    try:
        path = Path(source).expanduser()
        if path.is_dir() or (path.is_file() and is_gguf(path)):
            return path
        exists = path.exists()
    except (OSError, RuntimeError) as error:  # a name too long, a forbidden folder, an unknown ~user
        reason = os.strerror(error.errno) if getattr(error, "errno", None) else str(error)
        raise CheckpointError(f"{brief(source, 120)} cannot be read as a path ({reason}).") from None
    if exists:
        raise CheckpointError(
            f"{brief(source, 120)} is a file; give a .gguf file or the directory that holds config.json."
        )
    if source.startswith((".", "/", "~")) or not hub.HUB_ID.match(source):
        raise CheckpointError(
            f"No directory {brief(source, 120)}, and it is not a hub id of the form 'org/name'."
        )
    return hub.download(source)


def is_gguf(path: Path) -> bool:
    """A .gguf file, or a file of another name that starts with GGUF's magic (an Ollama blob)."""
    if path.suffix.lower() == ".gguf":
        return True
    with open(path, "rb") as file:
        return file.read(len(MAGIC)) == MAGIC


def load_checkpoint(
    source: str | Path | None = None, dtype=torch.float32, progress=None, fits: Fits | None = None
) -> Checkpoint:
    """The model `source` names, on the CPU. `progress(fraction, message)` hears what loading does;
    `fits` is told the model's size in `dtype` before any weight is read, and may refuse it
    (`weights.within`)."""
    path = resolve(source)
    if path.is_file():
        return gguf.load_gguf(path, dtype, progress, fits)
    name = "bundled: " + path.name if path == BUNDLED_MODEL else str(source).strip()
    return load_folder(path, name, dtype, fits)
