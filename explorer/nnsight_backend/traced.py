"""`TracedTransformer`: what the engine calls as its model when nnsight runs the model.

It answers `hidden_states` as our `Transformer` does. A forward (from token ids, or from a stream
entering the first block: every pass from position 0 that starts at the first block) is one nnsight
trace (`forward.run_trace`), its taps read and written at the HF modules' points; a forward from
position 0 with a KV cache (a patching sweep's runs, a generation's prompt) fills the cache with each
layer's keys and values as they pass. A rerun of blocks from a kept layer input (the patch sweeps'
passes, the lens's last position, a generation's next token after its cache) runs our own blocks
here, built from the same weights (`weights`): the eager rerun of a layer does too, as with our engine.
Everything else (the LM head, the final norm for the lens, RoPE tables) is our model's, which it wraps.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager

import torch
from torch import nn

from explorer.engine import rope
from explorer.engine.model import Transformer
from explorer.engine.taps import NO_TAPS, Taps
from explorer.errors import LimitError
from explorer.nnsight_backend.families import family
from explorer.nnsight_backend.forward import run_trace, unmapped

log = logging.getLogger(__name__)


class TracedTransformer(nn.Module):
    """Our `Transformer` (weights, blocks, LM head) with its forwards run through nnsight's tracing.

    `remote`: False (in this process), True (NDIF) or "local" (nnsight's serialising dry run of a remote
    request, in this process). `max_moved_bytes`: a remote forward estimated to save more is refused
    before it is sent (None: any). `tracing`: the lock every trace of the model holds."""

    def __init__(
        self,
        lm,
        model: Transformer,
        remote: bool | str = False,
        max_moved_bytes: float | None = None,
        tracing: AbstractContextManager | None = None,
    ):
        super().__init__()
        self.inner = model
        self.lm = lm  # nnsight's wrapper of the HF model (not a torch module: its weights are not ours)
        self.family = family(model.config.model_type)
        self.remote = remote
        self.max_moved_bytes = max_moved_bytes
        self.traces = 0  # nnsight traces run for forwards (weight fetches are not counted)
        self.moved_bytes = 0  # bytes the traces handed back, all told
        self.last_moved_bytes = 0  # and the latest one's
        # one trace of the model at a time (the app serves requests in threads; weight fetches share it)
        self.tracing = tracing or threading.RLock()

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["inner"], name)

    @property
    def where(self) -> str:
        """Where the model runs, for status lines."""
        if self.remote is True:
            return "on NDIF (remote, through nnsight)"
        return "here, through nnsight" + (" (remote simulated)" if self.remote else "")

    @property
    def forward_count(self) -> int:
        """Forwards run: the traces, and any our blocks ran from token ids (a generation's next token)."""
        return self.traces + self.inner.forward_count

    def estimate_bytes(self, n_tokens: int, batch: int = 1, layers_read: int | None = None) -> int:
        """What a forward of `n_tokens` saves when it reads the stream entering `layers_read` blocks
        (default every one) and the final one: (layers + 1) · B · N · hidden · dtype bytes."""
        c = self.inner.config
        layers = c.n_layers if layers_read is None else layers_read
        return (layers + 1) * batch * n_tokens * c.hidden_size * self._dtype_bytes()

    def _dtype_bytes(self) -> int:
        dtype = getattr(self.lm, "dtype", None)
        return dtype.itemsize if isinstance(dtype, torch.dtype) else 4

    def traced(self, positions: range | None, layers: range, last_only: bool, kept) -> bool:
        """Whether a pass is a forward the trace runs: from position 0 and the first block, every
        position kept. (Run here, a forward whose taps read or edit inside the attention call, scores,
        patterns or knockouts, runs our blocks instead; on NDIF it is refused.)"""
        return (
            layers.start == 0
            and (positions is None or positions.start == 0)
            and not last_only
            and kept is None
        )

    def hidden_states(
        self,
        ids: torch.Tensor | None = None,
        *,
        stream: torch.Tensor | None = None,
        layers: range | None = None,
        positions: range | None = None,
        cache=None,
        taps: Taps = NO_TAPS,
        last_only: bool = False,
        kept: list[int] | None = None,
    ) -> torch.Tensor:
        """`Transformer.hidden_states`, a forward through one trace (module doc).
        # ids [B, M] or stream [B, M, hidden] -> [B, M, hidden]"""
        c = self.inner.config
        layers = range(c.n_layers) if layers is None else layers
        if not self.traced(positions, layers, last_only, kept) or (not self.remote and unmapped(taps)):
            return self.inner.hidden_states(
                ids,
                stream=stream,
                layers=layers,
                positions=positions,
                cache=cache,
                taps=taps,
                last_only=last_only,
                kept=kept,
            )
        if ids is None:
            ids = torch.zeros(stream.shape[:2], dtype=torch.long, device=stream.device)
        if positions is not None and len(positions) != ids.shape[1]:
            raise ValueError(f"{len(positions)} positions for a stream of {ids.shape[1]}")
        if self.remote:
            if cache is not None:
                raise ValueError("Patching and generation keep keys and values here: run with remote=False.")
            self._check_moved(ids.shape, layers.stop if taps.block_input else 0)
        with self.tracing:
            out, moved = run_trace(
                self.lm,
                self.family,
                c,
                ids,
                stream=stream,
                stop=layers.stop,
                taps=taps,
                cache=cache,
                turned=self._turned(ids.shape[1]),
                remote=self.remote,
            )
        out = out.to(self.inner.norm.weight.dtype)  # NDIF's dtype (bfloat16) to ours
        self.traces += 1
        self.last_moved_bytes = moved
        self.moved_bytes += moved
        return out

    def _turned(self, n: int):
        """Queries or keys as the attention turns them (QK-normed where the model norms them, then by
        RoPE), from q_proj's or k_proj's output, by our model's layers: the HF attention does both inside
        one call. # (layer, [B, heads, M, d], "q" or "k") -> [B, heads, M, d]"""
        p = self.inner.pass_over(range(n), self.inner.norm.weight.dtype)

        def turned(layer: int, x: torch.Tensor, which: str) -> torch.Tensor:
            attention = self.inner.layers[layer].self_attn
            norm = attention.q_norm if which == "q" else attention.k_norm
            if norm is not None:
                x = norm(x)
            return rope.apply_rope(x, *p.rope(attention.window is not None))

        return turned

    def _check_moved(self, shape: torch.Size, layers_read: int) -> None:
        """Say what a remote forward will save, and refuse it past `max_moved_bytes`."""
        estimate = self.estimate_bytes(shape[1], shape[0], layers_read)
        log.info("NDIF forward of %d × %d tokens: about %s to move", shape[0], shape[1], size(estimate))
        if self.max_moved_bytes is not None and estimate > self.max_moved_bytes:
            raise LimitError(
                f"This run would move about {size(estimate)} back from NDIF ({layers_read} layers' inputs "
                f"and the final stream, {shape[1]:,} tokens), above the limit of "
                f"{size(self.max_moved_bytes)} (EXPLORER_NDIF_MAX_MB): shorten the prompt, or raise it."
            )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits for every position.  # [B, N] -> [B, N, vocab]"""
        return self.inner.logits(self.hidden_states(ids))


def size(n_bytes: float) -> str:
    """A byte count as people read it: 30 KB, 1.2 MB, 3.4 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes:,.0f} bytes"
