"""The decoder, top to bottom as data flows: embeddings -> blocks (RMSNorm, attention, RMSNorm, SwiGLU)
-> final norm -> LM head. Module names follow HF Llama (minus the `model.` prefix) so checkpoints map 1:1.

Attention here is the fast path only: PyTorch SDPA with `is_causal=True, enable_gqa=True`, which never
materialises an N×N map. The step-by-step eager path that exposes every stage is `explorer.attention`;
it reuses these modules' weights through `Attention.project`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from explorer import rope
from explorer.config import ModelConfig

# An edit of one layer's per-head attention outputs `probs @ v`, before o_proj (TransformerLens's
# hook_z): [B, H, N, d] -> [B, H, N, d]. `explorer.interventions` builds them (ablation; patching
# records the heads' outputs through one that returns them unchanged).
HeadEdit = Callable[[torch.Tensor], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        d, hidden = config.head_dim, config.hidden_size
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, d
        self.scale = d**-0.5
        self.q_proj = nn.Linear(hidden, config.n_heads * d, bias=config.qkv_bias)
        self.k_proj = nn.Linear(hidden, config.n_kv_heads * d, bias=config.qkv_bias)
        self.v_proj = nn.Linear(hidden, config.n_kv_heads * d, bias=config.qkv_bias)
        self.o_proj = nn.Linear(config.n_heads * d, hidden, bias=config.o_bias)

    def project(self, x: torch.Tensor):
        """Queries, keys and values before RoPE.  # x [B, N, hidden] -> [B, H, N, d], [B, H_kv, N, d] ×2"""
        B, N, _ = x.shape
        q = self.q_proj(x).view(B, N, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, N, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def merge_heads(self, y: torch.Tensor) -> torch.Tensor:
        """Per-head outputs back to the residual stream.  # [B, H, N, d] -> [B, N, hidden]"""
        B, _, N, _ = y.shape
        return self.o_proj(y.transpose(1, 2).reshape(B, N, self.n_heads * self.head_dim))

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_edit: HeadEdit | None = None
    ) -> torch.Tensor:
        q, k, v = self.project(x)
        q, k = rope.apply_rope(q, cos, sin), rope.apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True, scale=self.scale
        )  # [B, H, N, d]
        if head_edit is not None:
            y = head_edit(y)
        return self.merge_heads(y)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        hidden, inner, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_edit: HeadEdit | None = None
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, head_edit)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.register_buffer("inv_freq", rope.config_inverse_frequencies(config), persistent=False)

    def init_weights(self, std: float = 0.02, generator: torch.Generator | None = None) -> None:
        """Fresh weights as HF Llama initialises them: N(0, std) matrices, zero biases, unit norms."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=std, generator=generator)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, RMSNorm):
                nn.init.ones_(module.weight)

    def rope_tables(self, n_tokens: int, dtype: torch.dtype):
        """cos, sin for positions 0..N-1.  # ([N, d], [N, d])"""
        positions = torch.arange(n_tokens, device=self.inv_freq.device)
        return rope.cos_sin(rope.angles(positions, self.inv_freq), dtype)

    def hidden_states(
        self,
        ids: torch.Tensor,
        layer_inputs: torch.Tensor | None = None,
        head_edits: Mapping[int, HeadEdit] | None = None,
    ):
        """Final normed hidden state.  # ids [B, N] -> [B, N, hidden]

        If `layer_inputs` ([L, B, N, hidden]) is given, each block's input is written into it: that is
        all the eager path needs to rerun any layer later, without a second forward. `head_edits` maps a
        layer to the edit of its heads' outputs (see `HeadEdit`); other layers run unedited.
        """
        x = self.embed_tokens(ids)  # [B, N, hidden]
        cos, sin = self.rope_tables(ids.shape[1], x.dtype)
        edits = head_edits or {}
        for i, block in enumerate(self.layers):
            if layer_inputs is not None:
                layer_inputs[i].copy_(x)
            x = block(x, cos, sin, edits.get(i))
        return self.norm(x)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits for every position.  # [B, N] -> [B, N, vocab]"""
        return self.lm_head(self.hidden_states(ids))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
