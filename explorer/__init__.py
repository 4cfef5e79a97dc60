"""Attention Explorer: see how a Llama-family transformer attends, stage by stage.

explorer   `Explorer` and `load`: a checkpoint loaded and run through the engine
engine/    the model and its one forward with taps, the eager rerun, runs, generation, interventions
loading/   checkpoints: safetensors folders, GGUF files, the hub, the picker's catalogue, the models
           already on this machine (`local_models`)
nnsight_backend/  a Hugging Face model run through nnsight, here or on NDIF (`load(..., backend="nnsight")`)
views/     what each view of the app shows, pulled from a Run
figures/   numpy and token strings -> Plotly figures
app/       the Gradio app: its workspace, policy and one module per tab
tools/     the benchmark, the stress run and the training of the bundled model

The public names are imported when first read (PEP 562), so `import explorer.figures` loads no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from explorer.errors import CheckpointError, PromptError, UnsupportedConfigError

if TYPE_CHECKING:
    from explorer.engine.attention import AttentionInternals, kv_head_map
    from explorer.engine.config import ModelConfig, RopeScaling
    from explorer.engine.edits import Edit
    from explorer.engine.graph import Graph
    from explorer.engine.run import Run
    from explorer.explorer import Explorer, load
    from explorer.loading.local import local_models

# name -> the module that defines it
_LAZY = {
    "AttentionInternals": "explorer.engine.attention",
    "kv_head_map": "explorer.engine.attention",
    "ModelConfig": "explorer.engine.config",
    "RopeScaling": "explorer.engine.config",
    "Edit": "explorer.engine.edits",
    "Run": "explorer.engine.run",
    "Explorer": "explorer.explorer",
    "Graph": "explorer.engine.graph",
    "load": "explorer.explorer",
    "local_models": "explorer.loading.local",
}

__all__ = [
    "AttentionInternals",
    "CheckpointError",
    "Edit",
    "Explorer",
    "Graph",
    "ModelConfig",
    "PromptError",
    "RopeScaling",
    "Run",
    "UnsupportedConfigError",
    "kv_head_map",
    "load",
    "local_models",
]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
