"""One forward of the model nnsight runs, as one trace: our `Taps` read and written at the points
`families` maps them to, in the order the model passes them (nnsight's rule).

Points and where they are (B batch, M positions, H heads, d head size):
    block_input        layers[l].input                  [B, M, hidden]
    q, k, v            self_attn.{q,k,v}_proj.output    [B, M, H·d] seen as [B, H, M, d] (before QK-norm
                                                        and RoPE, as ours)
    heads              self_attn.o_proj.input           [B, M, H·d] seen as [B, H, M, d]
    attention_output   self_attn.o_proj.output
    after_attention    block input + what attention writes (an edit adds its change to that write)
    mlp_input          the MLP's norm's input (what the MLP alone reads)
    mlp_output         what the MLP writes (Gemma: after its norm)
    block_output       layers[l].output
    final              model.norm.output
A tap that returns a tensor writes it back. Queries after RoPE, scores, patterns and knockouts live
inside HF's attention call, which nnsight sees whole: a forward asking for them is refused (the eager
rerun of a layer, `Run.attention`, shows every one of them from the layer's saved input).

On NDIF the trace's body runs on the server, where our taps cannot: a remote forward saves each
layer's input and the final normed stream, and the taps that read them run here on what came back;
a remote forward that would edit, or read any other point, is refused.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass

import torch

from explorer.engine import deadline
from explorer.engine.taps import POINTS, Taps
from explorer.nnsight_backend.families import Family, at

INSIDE_ATTENTION = ("scores", "pattern")
REMOTE_POINTS = ("block_input", "final")
# (layer, q_proj's or k_proj's output as heads, "q" or "k") -> queries or keys QK-normed and turned by RoPE
Turn = Callable[[int, torch.Tensor, str], torch.Tensor]


@dataclass(frozen=True)
class Shapes:
    batch: int
    positions: int
    n_heads: int
    n_kv_heads: int
    head_dim: int

    def split(self, value: torch.Tensor, heads: int) -> torch.Tensor:
        """A projection's output as heads.  # [B, M, heads·d] -> [B, heads, M, d]"""
        return value.view(self.batch, self.positions, heads, self.head_dim).transpose(1, 2)

    def join(self, value: torch.Tensor) -> torch.Tensor:
        """Heads back as a projection's output.  # [B, heads, M, d] -> [B, M, heads·d]"""
        return value.transpose(1, 2).reshape(self.batch, self.positions, -1)


def unmapped(taps: Taps) -> list[str]:
    """The taps' points inside the attention call (scores, pattern, knockout), which nnsight sees whole."""
    named = [name for name in INSIDE_ATTENTION if getattr(taps, name) is not None]
    return named + (["knockout"] if taps.knockout is not None else [])


def refuse_unmapped(taps: Taps, remote: bool) -> None:
    """Refuse taps this backend cannot honour (ValueError naming them and the backend)."""
    if named := unmapped(taps):
        raise ValueError(
            f"The nnsight backend cannot read or edit {', '.join(named)} in a forward: they are inside "
            "the model's attention call, which nnsight sees whole. A layer's eager rerun "
            "(run.attention(layer)) shows each stage from the layer's saved input."
        )
    if remote:
        others = [name for name in POINTS if name not in REMOTE_POINTS and getattr(taps, name) is not None]
        if others:
            raise ValueError(
                f"A forward on NDIF (remote) reads the stream entering each block and the final one alone; "
                f"{', '.join(others)} (edits, ablations, patching, generation) run with remote=False."
            )


def written(tap, layer: int, value: torch.Tensor) -> torch.Tensor | None:
    """What `tap` leaves of `value`, or None where it leaves it as it is."""
    if tap is None:
        return None
    edited = tap(layer, value)
    return None if edited is None or edited is value else edited


class LocalForward:
    """The body of one local trace: the model runs in this process, our taps inside it."""

    def __init__(self, family: Family, taps: Taps, shapes: Shapes, cache=None, turned: Turn | None = None):
        self.family, self.taps, self.shapes = family, taps, shapes
        self.cache, self.turned = cache, turned
        self.read_bytes = 0  # what the taps read out of the model
        self.context = contextvars.copy_context()  # the caller's: its time bound and its job's stop

    def written(self, tap, layer: int, value: torch.Tensor) -> torch.Tensor | None:
        """`written`, counting what the tap reads."""
        if tap is not None:
            self.read_bytes += value.numel() * value.element_size()
        return written(tap, layer, value)

    def block(self, layer: int, block, stream: torch.Tensor | None) -> None:
        """Layer `layer`'s points, in the order the model passes them; `stream`: what enters it instead."""
        # a request's time bound or its page's Stop ends the forward between blocks; nnsight runs the body
        # outside the caller's context, so the check runs in the context the trace began in
        self.context.run(deadline.check)
        taps, s, family = self.taps, self.shapes, self.family
        if stream is not None:
            block.input = stream
        x = None
        if taps.block_input is not None or taps.after_attention is not None:
            x = stream if stream is not None else block.input
            edited = self.written(taps.block_input, layer, x)
            if edited is not None:
                block.input = x = edited
        attn = block.self_attn
        q = self.projection(attn.q_proj, taps.q, layer, s.n_heads, taps.queries is not None)
        if (
            taps.queries is not None
            and self.written(taps.queries, layer, self.turned(layer, q, "q")) is not None
        ):
            raise ValueError(
                "The nnsight backend reads the queries after RoPE but cannot edit them: the model turns "
                "them inside its attention call. Edit q (before RoPE) instead."
            )
        k = self.projection(attn.k_proj, taps.k, layer, s.n_kv_heads)
        v = self.projection(attn.v_proj, taps.v, layer, s.n_kv_heads)
        if self.cache is not None:
            self.cache.update(layer, 0, self.turned(layer, k, "k"), v)
        if taps.heads is not None:
            z = s.split(attn.o_proj.input, s.n_heads)
            edited = self.written(taps.heads, layer, z)
            if edited is not None:
                attn.o_proj.input = s.join(edited)
        attention = self.output(attn.o_proj, taps.attention_output, layer)
        if taps.after_attention is not None:
            writer = at(block, family.attention_writer)
            reread = attention is None or family.attention_writer != "self_attn.o_proj"
            write = writer.output if reread else attention
            after = x + write
            edited = self.written(taps.after_attention, layer, after)
            # the change (0 where the tap only read; an edit in place of `after` included) goes to the
            # write, as the stream after attention is no module's output
            writer.output = write + ((after if edited is None else edited) - (x + write))
        if taps.mlp_input is not None:
            reader = at(block, family.mlp_reader)
            edited = self.written(taps.mlp_input, layer, reader.input)
            if edited is not None:
                reader.input = edited
        self.output(at(block, family.mlp_writer), taps.mlp_output, layer)
        self.output(block, taps.block_output, layer)

    def projection(self, module, tap, layer: int, heads: int, wanted: bool = False) -> torch.Tensor | None:
        """A q, k or v projection's output as heads, tapped (None where neither a tap, the cache nor
        `wanted` reads it).  # -> [B, heads, M, d]"""
        if tap is None and self.cache is None and not wanted:
            return None
        value = self.shapes.split(module.output, heads)
        edited = self.written(tap, layer, value)
        if edited is not None:
            module.output = self.shapes.join(edited)
            return edited
        return value

    def output(self, module, tap, layer: int) -> torch.Tensor | None:
        """A module's output, tapped (None where no tap reads it)."""
        if tap is None:
            return None
        value = module.output
        edited = self.written(tap, layer, value)
        if edited is not None:
            module.output = edited
            return edited
        return value


def run_trace(
    lm, family: Family, config, inputs, *, stream, stop, taps, cache=None, turned=None, remote=False
):
    """The stream leaving block `stop` − 1 (the final normed stream when `stop` is every block), from
    token ids `inputs` [B, M] (or, with `stream`, what enters the first block instead), as one trace;
    with a KV `cache`, each layer's keys (`turned`: QK-normed and turned by RoPE) and values kept in it.
    # -> [B, M, hidden], and the bytes the trace handed back"""
    refuse_unmapped(taps, bool(remote))
    if remote:
        return _remote_trace(lm, family.decoder, inputs, stream, stop, config.n_layers, taps, remote)
    import nnsight

    batch, positions = inputs.shape
    shapes = Shapes(batch, positions, config.n_heads, config.n_kv_heads, config.head_dim)
    last = stop == config.n_layers
    # made before the trace: of what its body assigns, only what it saves is seen after it
    body = LocalForward(family, taps, shapes, cache, turned)
    with lm.trace(inputs, use_cache=False) as tracer:
        decoder = at(lm, family.decoder)
        for layer in range(stop):
            body.block(layer, decoder.layers[layer], stream if layer == 0 else None)
        if last:
            final = body.output(decoder.norm, taps.final, config.n_layers)
            out = decoder.norm.output if final is None else final
        else:
            out = decoder.layers[stop - 1].output
        out = nnsight.save(out)
        tracer.stop()  # what follows (the LM head's [B, M, vocab]) is computed from `out` when read
    return out, body.read_bytes + out.numel() * out.element_size()


def _remote_trace(lm, decoder_path: str, inputs, stream, stop: int, n_layers: int, taps: Taps, remote):
    """`run_trace` on NDIF: the body, sent to the server, saves each layer's input (where the taps read
    it) and the stream out; the taps then read what came back, here.  # -> [B, M, hidden], bytes"""
    import nnsight

    read_inputs = taps.block_input is not None
    last = stop == n_layers
    with lm.trace(inputs, use_cache=False, remote=remote) as tracer:
        decoder = getattr(lm, decoder_path)  # the body is sent to NDIF: it calls nothing of ours
        if stream is not None:
            decoder.layers[0].input = stream
        inputs_kept = nnsight.save(
            [decoder.layers[layer].input for layer in range(stop)] if read_inputs else []
        )
        out = nnsight.save(decoder.norm.output if last else decoder.layers[stop - 1].output)
        tracer.stop()
    edits = [written(taps.block_input, layer, kept) for layer, kept in enumerate(inputs_kept)]
    if any(edit is not None for edit in edits) or (last and written(taps.final, n_layers, out) is not None):
        raise ValueError("A forward on NDIF (remote) cannot edit the stream; run with remote=False.")
    return out, sum(t.numel() * t.element_size() for t in (*inputs_kept, out))
