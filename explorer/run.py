"""Explorer (a loaded model) and Run (one prompt through it).

A Run costs one fast SDPA forward. It keeps each layer's input hidden state ([L, N, hidden], linear in
N), so any layer's attention can be rerun through the eager path later without a second forward.
Nothing N×N is computed until a layer is asked for, and logits only where they are read.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from explorer.attention import AttentionInternals, Projections, eager_attention, project
from explorer.checkpoints import Checkpoint, load_checkpoint
from explorer.config import ModelConfig
from explorer.interventions import Ablation, PatchResult, Progress, patch_heads
from explorer.tokens import encode

if TYPE_CHECKING:
    from explorer.generate import Generation

DEFAULT_EAGER_CACHE_BYTES = 256 * 2**20


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Explorer:
    """A model and its tokenizer, ready to run prompts."""

    def __init__(self, checkpoint: Checkpoint, device: torch.device | str | None = None):
        self.name = checkpoint.name
        self.path = checkpoint.path
        self.config: ModelConfig = checkpoint.config
        self.tokenizer = checkpoint.tokenizer
        self.device = torch.device(device) if device else default_device()
        self.model = checkpoint.model.to(self.device).eval()
        self.forward_count = 0  # fast forwards run so far: the app proves switches don't add one

    @property
    def dtype(self) -> torch.dtype:
        return self.model.embed_tokens.weight.dtype

    @torch.inference_mode()
    def run(
        self,
        text: str,
        max_tokens: int | None = None,
        ablate: Iterable[tuple[int, int]] = (),
        ablate_mode: str = "zero",
    ) -> Run:
        """One fast forward over `text`, truncated to the context (or `max_tokens`) if longer: cut to
        `tokens.CHARS_PER_TOKEN` characters per token allowed before it is tokenized, then to the tokens.

        `ablate`: (layer, head) pairs whose outputs are zeroed or mean-replaced (`ablate_mode`, see
        `explorer.interventions`); the run remembers it, so its eager reruns apply the same edit.
        """
        ablation = Ablation.parse(self.config, ablate, ablate_mode)
        limit = min(max_tokens or self.config.context_length, self.config.context_length)
        encoded = encode(self.tokenizer, text, limit)
        ids = torch.tensor([encoded.ids], device=self.device)  # [1, N]
        n, hidden = ids.shape[1], self.config.hidden_size
        layer_inputs = torch.empty(self.config.n_layers, 1, n, hidden, dtype=self.dtype, device=self.device)
        start = time.perf_counter()
        final_hidden = self.model.hidden_states(
            ids, layer_inputs, ablation.edits() if ablation else None
        )  # [1, N, hidden]
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        self.forward_count += 1
        run = Run(
            self,
            encoded.ids,
            encoded.tokens,
            encoded.n_dropped,
            layer_inputs[:, 0],
            final_hidden[0],
            seconds,
            ablation,
        )
        run.n_chars_dropped = encoded.n_chars_dropped
        return run

    def patch_heads(
        self,
        clean: str,
        corrupted: str,
        answer: str,
        distractor: str,
        progress: Progress | None = None,
        max_tokens: int | None = None,
    ) -> PatchResult:
        """Patch each head's output from the clean prompt's run into the corrupted one's, one head at a
        time, and read logit(answer) − logit(distractor) at the last position (`explorer.interventions`).
        `progress(fraction)` is called as the sweep goes; prompts past `max_tokens` are refused."""
        return patch_heads(self, clean, corrupted, answer, distractor, progress, max_tokens)

    def generate(
        self,
        prompt: str,
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
        max_tokens: int | None = None,
    ) -> Generation:
        """New tokens after `prompt`, one step at a time from a KV cache: iterate the Generation for each
        step's token, candidates and attention row [L, H, q+1]; its `run` is the sequence as a Run.
        Temperature 0 is greedy; `eos_token_id` defaults to the config's (see explorer.generate); the
        prompt and new tokens together stay within `max_tokens` (default: the model's context)."""
        from explorer.generate import Generation  # it builds Runs: imported here to keep imports one-way

        return Generation(
            self,
            prompt,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            seed,
            stop_at_eos,
            eos_token_id,
            max_tokens,
        )


class Run:
    """One prompt's fast forward, with lazy access to logits and to any layer's eager internals."""

    def __init__(
        self, explorer, ids, tokens, n_dropped, layer_inputs, final_hidden, forward_seconds, ablation=None
    ):
        self.explorer = explorer
        self.ids: list[int] = ids  # [N]
        self.tokens: list[str] = tokens  # [N] display strings
        self.n_dropped: int = n_dropped  # tokens cut to fit the context
        self.n_chars_dropped = 0  # characters cut before tokenizing (tokens.CHARS_PER_TOKEN)
        self.layer_inputs = layer_inputs  # [L, N, hidden] input of each block (model dtype, device)
        self.final_hidden = final_hidden  # [N, hidden] after the final norm
        self.forward_seconds: float = forward_seconds
        self.ablation: Ablation | None = ablation  # heads this run's forward (and eager reruns) ablate
        self.eager_seconds: dict[int, float] = {}
        self.eager_cache_bytes = DEFAULT_EAGER_CACHE_BYTES
        self._eager: OrderedDict[int, AttentionInternals] = OrderedDict()
        self._projections: OrderedDict[int, Projections] = OrderedDict()
        # Small results the views derive from this run and keep with it (`explorer.pooled`: a layer's
        # pooled maps past the view budget, some 60 KB a layer); each has `nbytes`, counted below.
        self.kept: dict[Hashable, Any] = {}

    @property
    def config(self) -> ModelConfig:
        return self.explorer.config

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    @property
    def truncated(self) -> bool:
        return self.n_dropped > 0 or self.n_chars_dropped > 0

    @property
    def ablated(self) -> tuple[tuple[int, int], ...]:
        """The (layer, head) pairs this run ablates; empty for a plain run."""
        return self.ablation.heads if self.ablation else ()

    def head_edit(self, layer: int):
        """The edit this run makes to `layer`'s head outputs (an ablation), or None."""
        return self.ablation.edit(layer) if self.ablation else None

    @cached_property
    def logits(self) -> torch.Tensor:
        """Next-token logits at every position.  # [N, vocab] float32 CPU"""
        with torch.inference_mode():
            return self.explorer.model.lm_head(self.final_hidden).float().cpu()

    def next_token_probs(self) -> torch.Tensor:
        """The model's distribution for the token after the prompt (last position only).  # [vocab]"""
        with torch.inference_mode():
            return self.explorer.model.lm_head(self.final_hidden[-1]).float().softmax(-1).cpu()

    def top_next_tokens(self, k: int = 10) -> list[tuple[str, float]]:
        probs, ids = self.next_token_probs().topk(k)
        tokenizer = self.explorer.tokenizer
        return [
            (tokenizer.decode([i], skip_special_tokens=False), p)
            for i, p in zip(ids.tolist(), probs.tolist(), strict=True)
        ]

    def _check_layer(self, layer: int) -> None:
        n_layers = self.config.n_layers
        if not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ValueError(f"layer must be an integer in [0, {n_layers - 1}], got {layer!r}")

    def _normed_input(self, layer: int) -> torch.Tensor:
        return self.explorer.model.layers[layer].input_layernorm(self.layer_inputs[layer])

    def attention(self, layer: int, remember: bool = True) -> AttentionInternals:
        """Every stage of `layer`'s attention, from the cached input (no new forward).  float32 CPU

        `remember=False` leaves the run's bounded cache alone (for sweeps over every layer).
        """
        self._check_layer(layer)
        if layer in self._eager:
            self._eager.move_to_end(layer)
            return self._eager[layer]
        model = self.explorer.model
        start = time.perf_counter()
        with torch.inference_mode():
            internals = eager_attention(
                model.layers[layer].self_attn,
                self._normed_input(layer),
                model.inv_freq,
                layer,
                self.head_edit(layer),
            )
        internals = _to_cpu(internals)
        self.eager_seconds[layer] = time.perf_counter() - start
        if remember:
            self._remember(layer, internals)
        return internals

    def projections(self, layer: int) -> Projections | AttentionInternals:
        """q, k, v of `layer` before and after RoPE (linear in N), from the cached input: what the
        views read when a layer's maps are too big to hold (`explorer.blockwise`). The layer's full
        internals when they are cached, which hold the same fields."""
        self._check_layer(layer)
        if layer in self._eager:
            return self._eager[layer]
        if layer in self._projections:
            self._projections.move_to_end(layer)
            return self._projections[layer]
        model = self.explorer.model
        with torch.inference_mode():
            projections = project(
                model.layers[layer].self_attn, self._normed_input(layer), model.inv_freq, layer
            )
        self._projections[layer] = projections = _to_cpu(projections)
        self._trim()
        return projections

    def _remember(self, layer: int, internals: AttentionInternals) -> None:
        self._eager[layer] = internals
        self._projections.pop(layer, None)
        self._trim()

    def _trim(self) -> None:
        """Drop the oldest cached layers, projections first, while they pass `eager_cache_bytes`; a layer
        bigger than the whole budget is not kept at all."""
        for cache in (self._projections, self._eager):
            while cache and self.cached_eager_bytes > self.eager_cache_bytes:
                cache.popitem(last=False)

    @property
    def cached_eager_bytes(self) -> int:
        cached = (*self._eager.values(), *self._projections.values())
        return sum(_nbytes(internals) for internals in cached)

    def sdpa_output(self, layer: int) -> torch.Tensor:
        """The fast path's attention output for `layer`, recomputed from its cached input.  # [N, hidden]"""
        self._check_layer(layer)
        model = self.explorer.model
        with torch.inference_mode():
            cos, sin = model.rope_tables(self.n_tokens, self.layer_inputs.dtype)
            out = model.layers[layer].self_attn(
                self._normed_input(layer)[None], cos, sin, self.head_edit(layer)
            )
        return out[0].float().cpu()

    def cache_nbytes(self) -> int:
        """Memory this run holds: cached layer inputs, cached eager layers, and what the views keep."""
        own = self.layer_inputs.numel() * self.layer_inputs.element_size()
        own += self.final_hidden.numel() * self.final_hidden.element_size()
        return own + self.cached_eager_bytes + sum(value.nbytes for value in self.kept.values())


def _to_cpu(internals: AttentionInternals | Projections) -> AttentionInternals | Projections:
    if internals.q.device.type == "cpu":
        return internals
    tensors = {
        f.name: getattr(internals, f.name).cpu()
        for f in dataclasses.fields(internals)
        if isinstance(getattr(internals, f.name), torch.Tensor)
    }
    return dataclasses.replace(internals, **tensors)


def _nbytes(internals: AttentionInternals | Projections) -> int:
    return sum(t.numel() * t.element_size() for t in vars(internals).values() if isinstance(t, torch.Tensor))


def load(
    source: str | Path | None = None,
    device: torch.device | str | None = None,
    progress=None,
    max_bytes: float | None = None,
) -> Explorer:
    """The bundled model (no argument), a local HF-layout directory, a .gguf file, or a hub id
    ("org/name"). `progress(fraction, message)`, if given, hears each stage of loading; a model whose
    float32 weights would pass `max_bytes` is refused before any is read."""
    explorer = Explorer(load_checkpoint(source, progress=progress, max_bytes=max_bytes), device)
    if progress is not None:
        progress(1.0, f"Loaded {explorer.name} on {explorer.device}")
    return explorer
