"""Attention Explorer: see how a Llama-family transformer attends, stage by stage.

engine/    the model and its one forward with taps, the eager rerun, runs, generation, interventions
loading/   checkpoints: safetensors folders, GGUF files, the hub, the picker's catalogue, the models
           already on this machine (`local_models`)
views/     what each view of the app shows, pulled from a Run
figures/   numpy and token strings -> Plotly figures
app/       the Gradio app: its workspace, policy and one module per tab
tools/     the benchmark, the stress run and the training of the bundled model
"""

from explorer.engine.attention import AttentionInternals, kv_head_map
from explorer.engine.config import ModelConfig, RopeScaling
from explorer.engine.explorer import Explorer, load
from explorer.engine.run import Run
from explorer.errors import CheckpointError, PromptError, UnsupportedConfigError
from explorer.loading.local import local_models

__all__ = [
    "AttentionInternals",
    "CheckpointError",
    "Explorer",
    "ModelConfig",
    "PromptError",
    "RopeScaling",
    "Run",
    "UnsupportedConfigError",
    "kv_head_map",
    "load",
    "local_models",
]
