"""Where each of our taps' points is in the modules nnsight sees, per family, written once.

Every family's decoder is HF's `model.layers[l]` with `self_attn.{q,k,v,o}_proj`, then `model.norm`.
They differ in what the attention and the MLP write into the stream: Llama, Mistral, Qwen2 and Qwen3
add o_proj's output and the MLP's; Gemma 3 norms both first (`post_attention_layernorm`,
`post_feedforward_layernorm`), and its MLP reads the stream through `pre_feedforward_layernorm`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """Module paths inside a decoder layer (dotted, as nnsight's envoys nest them)."""

    attention_writer: str  # its output is what attention adds to the stream
    mlp_reader: str  # its input is the stream the MLP reads (a norm: nothing else reads its input)
    mlp_writer: str  # its output is what the MLP adds to the stream
    decoder: str = "model"  # the decoder under the causal-LM wrapper: .layers, .norm


LLAMA = Family(attention_writer="self_attn.o_proj", mlp_reader="post_attention_layernorm", mlp_writer="mlp")
GEMMA3 = Family(
    attention_writer="post_attention_layernorm",
    mlp_reader="pre_feedforward_layernorm",
    mlp_writer="post_feedforward_layernorm",
)
FAMILIES = {"llama": LLAMA, "mistral": LLAMA, "qwen2": LLAMA, "qwen3": LLAMA, "gemma3_text": GEMMA3}


def family(model_type: str) -> Family:
    """The family of a config's `model_type` (one `ModelConfig.from_hf_config` accepted)."""
    return FAMILIES[model_type]


def at(envoy, path: str):
    """The envoy at a dotted `path` below `envoy`."""
    for name in path.split("."):
        envoy = getattr(envoy, name)
    return envoy
