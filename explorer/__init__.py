"""Attention Explorer: see how a Llama-family transformer attends, stage by stage."""

from explorer.attention import AttentionInternals, kv_head_map
from explorer.checkpoints import CheckpointError
from explorer.config import ModelConfig, RopeScaling, UnsupportedConfigError
from explorer.run import Explorer, Run, load
from explorer.tokens import PromptError

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
]
