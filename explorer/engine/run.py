"""Run: one prompt's fast forward, and lazy access to what it holds.

A Run costs one fast SDPA forward (`explorer.explorer.Explorer.run`). It keeps each layer's input
hidden state ([L, N, hidden], linear in N), so any layer's attention can be rerun through the eager path
later without a second forward. Nothing N×N is computed until a layer is asked for, and logits only where
they are read: a Run keeps nothing [N, vocab].
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

from explorer.engine import flow, lens, qk
from explorer.engine import source_effect as source_effects
from explorer.engine.attention import AttentionInternals, Projections, eager_attention, project
from explorer.engine.config import ModelConfig
from explorer.engine.edits import Edits
from explorer.engine.interventions import Ablation
from explorer.engine.rows import AttentionRows
from explorer.engine.source_effect import SourceEffect
from explorer.engine.taps import NO_TAPS, Tap, Taps

DEFAULT_EAGER_CACHE_BYTES = 256 * 2**20
FLOW_READS = ("resid", "q", "k", "v", "mlp", "scores")  # edits flow redoes (it splits z by key itself)


class Run:
    """One prompt's fast forward, with lazy access to logits and to any layer's eager internals."""

    def __init__(
        self,
        explorer,
        *,
        ids: list[int],
        tokens: list[str],
        layer_inputs: torch.Tensor,
        final_hidden: torch.Tensor,
        forward_seconds: float,
        moved_bytes: int = 0,
        n_dropped: int = 0,
        n_chars_dropped: int = 0,
        ablation: Ablation | None = None,
        edits: Edits | None = None,
    ):
        self.explorer = explorer  # the Explorer (model and tokenizer) that ran it
        self.ids: list[int] = ids  # [N]
        self.tokens: list[str] = tokens  # [N] display strings
        self.n_dropped: int = n_dropped  # tokens cut to fit the context
        self.n_chars_dropped = n_chars_dropped  # characters cut before tokenizing (tokens.CHARS_PER_TOKEN)
        self.layer_inputs = layer_inputs  # [L, N, hidden] input of each block (model dtype, device)
        self.final_hidden = final_hidden  # [N, hidden] after the final norm
        self.forward_seconds: float = forward_seconds
        self.moved_bytes = moved_bytes  # what its forward handed back from the model (nnsight's trace)
        self.ablation: Ablation | None = ablation  # heads this run's forward (and eager reruns) ablate
        self.edits: Edits | None = edits  # what its forward (and eager reruns) wrote on its taps
        ablating = Taps(heads=ablation.tap if ablation else None)
        # [positions 0..N−1] its edits, then its ablation: what every rerun of a layer from its kept input
        # applies again (the inputs kept are the edited ones: an edit of a block's input is not redone)
        edited = (
            NO_TAPS if edits is None else dataclasses.replace(edits.taps(range(len(ids))), block_input=None)
        )
        self.taps: Taps = edited.then(ablating)
        self.eager_seconds: dict[int, float] = {}
        self.eager_cache_bytes = DEFAULT_EAGER_CACHE_BYTES
        self._eager: OrderedDict[int, AttentionInternals] = OrderedDict()
        self._projections: OrderedDict[int, Projections] = OrderedDict()
        # Small results the views derive from this run and keep with it (`memo`; `views.pooled`: a
        # layer's pooled maps past the view budget, some 60 KB a layer); each has `nbytes`, counted below.
        self._memos: dict[Hashable, Any] = {}

    @property
    def config(self) -> ModelConfig:
        return self.explorer.config

    def memo(self, key: Hashable, compute: Callable[[Any], Any], stale: Callable[[Any], bool] | None = None):
        """A reading derived from this run, kept with it under `key`: computed by `compute(kept)` (kept:
        what was kept before, or None) where nothing is kept yet or `stale(kept)`, else the one kept.
        What it keeps has `nbytes` (counted in `cache_nbytes`)."""
        kept = self._memos.get(key)
        if kept is None or (stale is not None and stale(kept)):
            kept = self._memos[key] = compute(kept)
        return kept

    def recalled(self, key: Hashable):
        """The reading `memo` keeps under `key`, or None."""
        return self._memos.get(key)

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

    @property
    def heads_tap(self) -> Tap | None:
        """What this run does to its heads' outputs (its edits of z, its ablation) in every forward and
        eager rerun."""
        return self.taps.heads

    def require_unedited(self, reading: str, taps: tuple[str, ...] = (), knockouts: bool = False) -> None:
        """Refuse a reading that cannot yet redo this run's edits of some taps (all but `taps`, and but
        knockouts where it redoes them)."""
        edits = self.edits.edits if self.edits else []
        edited = [e for e in edits if e.tap not in taps and not (knockouts and e.op == "block")]
        if edited:
            raise ValueError(
                f"{reading} does not yet read a run with edits of "
                f"{', '.join(sorted({e.tap for e in edited}))} ({'; '.join(map(str, edited))}). Its "
                "attention maps, logits, logit lens and logit attribution show the edited model."
            )

    @property
    def logits(self) -> torch.Tensor:
        """Next-token logits at every position, computed each time they are read and never kept: at
        2,048 tokens of a 262,144-token vocabulary (Gemma 3) they are 2 GiB. What the views show needs
        a few positions (`logits_at`) or the last one (`next_token_probs`).  # [N, vocab] float32 CPU"""
        return self.logits_at(range(self.n_tokens))

    def logits_at(self, positions: int | Sequence[int]) -> torch.Tensor:
        """Next-token logits at one position or several (negative ones count from the end), computed
        from the final normed stream the forward kept.  # [vocab] or [P, vocab] float32 CPU"""
        with torch.inference_mode():
            return self.explorer.model.logits(self.final_hidden[positions]).float().cpu()

    def next_token_probs(self) -> torch.Tensor:
        """The model's distribution for the token after the prompt (last position only).  # [vocab]"""
        with torch.inference_mode():
            return self.explorer.model.logits(self.final_hidden[-1]).float().softmax(-1).cpu()

    def top_next_tokens(self, k: int = 10) -> list[tuple[str, float]]:
        probs, ids = self.next_token_probs().topk(k)
        tokenizer = self.explorer.tokenizer
        return [
            (tokenizer.decode([i], skip_special_tokens=False), p)
            for i, p in zip(ids.tolist(), probs.tolist(), strict=True)
        ]

    def logit_lens(self, positions: list[int] | None = None, top_k: int = 5) -> lens.LogitLens:
        """What the model is about to say after every layer, at `positions` (None: all): the top-k
        tokens, their probabilities and the KL to the output (`explorer.engine.lens`)."""
        return lens.logit_lens(self, positions, top_k)

    def logit_attribution(
        self, answer: str, distractor: str | None = None, position: int = -1
    ) -> lens.Attribution:
        """The direct effect of each head, MLP and the embedding on logit(answer) (− logit(distractor))
        at `position`; the parts sum to the total (`explorer.engine.lens`). An edited run's parts are
        its edited heads and MLPs, and what each edit of the stream added (`.stream_edits`)."""
        return lens.logit_attribution(self, answer, distractor, position)

    def attention_to(self, key: int, query: int = -1) -> torch.Tensor:
        """Every head's attention weight from `query` to `key`.  # [L, H] float32 CPU"""
        return lens.attention_to(self, key, query)

    def contributions(self, layer: int, position: int = -1) -> flow.Contributions:
        """Each part's share of the stream at `position` after `layer`'s attention (every head's part
        from every key, and the block's input) and after its MLP (`explorer.engine.flow`)."""
        self.require_unedited("Contributions", FLOW_READS)
        return flow.contributions(self, layer, position)

    def information_flow(self, position: int = -1, threshold: float = 0.04) -> flow.InformationFlow:
        """The routes that carry the stream at `position` to the output, edges at or above `threshold`
        (Ferrando & Voita 2024; `explorer.engine.flow`)."""
        self.require_unedited("Information flow", FLOW_READS)
        return flow.information_flow(self, position, threshold)

    def rollout(self, position: int = -1) -> torch.Tensor:
        """Attention rollout (Abnar & Zuidema 2020): row `position` of Â_{L−1} ⋯ Â_0.  # [N] float32 CPU"""
        return flow.rollout(self, position)

    def score_attribution(self, layer: int, head: int, query: int, key: int) -> qk.ScoreAttribution:
        """Why `head` of `layer` scores `key` as it does from `query`: the scaled score split into
        query-side × key-side sources (the embedding, each earlier head, o_proj bias and MLP, the q/k
        biases); `.table` [S_q, S_k] sums to `.score` (`explorer.engine.qk`)."""
        self.require_unedited("Score attribution", knockouts=True)
        return qk.score_attribution(self, layer, head, query, key)

    def key_drivers(self, layer: int, head: int, query: int) -> qk.KeyDrivers:
        """Each key-side source's part of `head`'s scaled score of `query` at every key, the query side
        summed: `.parts` [S, N], column j summing to `.scores[j]`, 0 outside the mask."""
        self.require_unedited("Key drivers", knockouts=True)
        return qk.key_drivers(self, layer, head, query)

    def source_effect(
        self, layer: int, head: int, query: int, key: int, source, side: str = "key", mode: str = "zero"
    ) -> SourceEffect:
        """The causal test of one source's part in `score_attribution`: its write taken out of the key's
        stream (`side="key"`) or the query's, zeroed or mean-replaced, the score and the attention weight
        recomputed (norms and softmax included) beside the split's linear prediction
        (`explorer.engine.source_effect`)."""
        self.require_unedited("A source's effect", knockouts=True)
        return source_effects.source_effect(self, layer, head, query, key, source, side, mode)

    def _check_layer(self, layer: int) -> None:
        n_layers = self.config.n_layers
        if not isinstance(layer, int) or not 0 <= layer < n_layers:
            raise ValueError(f"layer must be an integer in [0, {n_layers - 1}], got {layer!r}")

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
                model.layers[layer],
                self.layer_inputs[layer],
                model.layer_inv_freq(layer),
                layer,
                self.taps,
            )
        internals = _to_cpu(internals)
        self.eager_seconds[layer] = time.perf_counter() - start
        if remember:
            self._remember(layer, internals)
        return internals

    def attention_rows(
        self, layer: int, queries: range | list[int] | int, head: int | None = None
    ) -> AttentionRows:
        """The one attention's rows of `queries` (a range or list of positions, negative from the end),
        every head or `head` alone, over every key, from the layer's projections: `.scores`, `.scaled`,
        `.masked` (−inf outside the mask) and `.probs`, each [H or 1, Q, N] float32 CPU, computed when
        read. The weights as the model computes them: an ablated run's edit is on the heads' outputs."""
        self._check_layer(layer)
        if isinstance(queries, int) and not isinstance(queries, bool):
            queries = [queries]
        if (
            isinstance(queries, range)
            and queries.step == 1
            and 0 <= queries.start <= queries.stop <= self.n_tokens
        ):
            picked = queries
        else:
            picked = [lens.check_position(self, q, "query") for q in queries]
        if head is not None and (isinstance(head, bool) or not isinstance(head, int)):
            raise ValueError(f"head must be a whole number or None, got {head!r}")
        return self.projections(layer).rows(picked, head)

    def projections(self, layer: int, remember: bool = True) -> Projections:
        """q, k, v of `layer` before and after RoPE (linear in N), from the cached input: what the
        views read when a layer's maps are too big to hold (`explorer.engine.blockwise`); those of the
        layer's full internals when they are cached. `remember=False` leaves the run's cache alone."""
        self._check_layer(layer)
        if layer in self._eager:
            return self._eager[layer].projections
        if layer in self._projections:
            self._projections.move_to_end(layer)
            return self._projections[layer]
        model = self.explorer.model
        with torch.inference_mode():
            projections = project(
                model.layers[layer], self.layer_inputs[layer], model.layer_inv_freq(layer), layer, self.taps
            )
        projections = _to_cpu(projections)
        if remember:
            self._projections[layer] = projections
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
            p = model.pass_over(range(self.n_tokens), self.layer_inputs.dtype, taps=self.taps)
            out = model.layers[layer].attend(self.layer_inputs[layer][None], layer, p)
        return out[0].float().cpu()

    def cache_nbytes(self) -> int:
        """Memory this run holds: cached layer inputs, cached eager layers, and what the views keep."""
        own = self.layer_inputs.numel() * self.layer_inputs.element_size()
        own += self.final_hidden.numel() * self.final_hidden.element_size()
        return own + self.cached_eager_bytes + sum(value.nbytes for value in self._memos.values())


def _to_cpu(internals: AttentionInternals | Projections) -> AttentionInternals | Projections:
    if internals.q.device.type == "cpu":
        return internals
    if isinstance(internals, AttentionInternals):
        rows = internals.rows
        moved = dataclasses.replace(
            rows, q=rows.q.cpu(), k=rows.k.cpu(), positions=rows.positions.cpu(), allowed=rows.allowed.cpu()
        )
        moved.__dict__["probs"] = rows.probs.cpu()  # the stage computed, kept as it was
        return AttentionInternals(_to_cpu(internals.projections), rows=moved, output=internals.output.cpu())
    return dataclasses.replace(internals, **{name: t.cpu() for name, t in internals.tensors().items()})


def _nbytes(internals: AttentionInternals | Projections) -> int:
    return sum(t.numel() * t.element_size() for t in internals.tensors().values())
