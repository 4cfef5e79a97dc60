"""Interventions on heads: ablation (zero / mean) and activation patching between two prompts.

A head's output is its attention output `probs @ v` ([N, d]) before o_proj, at every position
(TransformerLens's `hook_z`).
- Zero ablation sets it to 0; mean ablation replaces it, at every position, by its mean over the prompt's
  positions, computed in that same (ablated) forward. An `Ablation` is a tap on the heads' outputs
  (`Taps.heads`), applied on the fast path and the eager path alike.
- Patching runs the corrupted prompt with head (l, h)'s output replaced, at every position, by its value
  in the clean run. The logit difference is logit(answer) − logit(distractor) at the last position;
  recovered = (patched − corrupted) / (clean − corrupted).

The sweep over all L × H heads costs far less than L · H forwards (`explorer.tools.bench.patching` measures
it), and runs through the model's one forward:
- every patch of every layer rides in one batch that grows as it goes down the layers: the H patches of
  layer l join at layer l, when their input is still the corrupted run's (nothing before l is recomputed);
- at layer l a tap hands o_proj the heads' outputs: the patched head's from the clean run, every other
  head's from the corrupted run (what the layer's attention computed for those rows is replaced);
- positions before the first token where the prompts differ are the same in both runs (the model is
  causal), so only the positions from there on are recomputed, reading the earlier keys and values from
  the corrupted run's KV cache;
- in the last layer only the last position is recomputed, and of the LM head only the answer's and the
  distractor's rows are used (through `Transformer.logits`, soft-capped where the model caps them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

import torch

from explorer.engine import deadline
from explorer.engine.attention import kv_head_map
from explorer.engine.config import ModelConfig
from explorer.engine.kv_cache import KVCache, PrefixCache
from explorer.engine.model import Transformer
from explorer.engine.patch_metrics import METRICS, Reading, read_states
from explorer.engine.taps import Taps, recorder
from explorer.engine.tokens import check_characters, display_tokens, encode, quoted
from explorer.errors import PromptError

ABLATE_MODES = ("zero", "mean")
MAX_TOKEN_CHARS = 1024  # an answer longer than this is no single token of any vocabulary; it is not read
SWEEP_BUDGET_BYTES = 512 * 2**20  # activations one pass of the sweep may hold; more patches: more passes

Progress = Callable[[float], object]  # told the fraction of a sweep done, e.g. a gr.Progress


@dataclass(frozen=True)
class Ablation:
    """Heads whose outputs a run replaces: sorted (layer, head) pairs, each once, and how."""

    heads: tuple[tuple[int, int], ...]
    mode: str  # "zero" or "mean"

    @classmethod
    def parse(cls, config: ModelConfig, heads: Iterable, mode: str = "zero") -> Ablation | None:
        """Checked heads and mode; None when there is nothing to ablate (a plain run)."""
        if mode not in ABLATE_MODES:
            raise ValueError(f"ablate_mode must be one of {', '.join(map(repr, ABLATE_MODES))}, got {mode!r}")
        pairs = sorted({_check_head(config, pair) for pair in heads or ()})
        return cls(tuple(pairs), mode) if pairs else None

    def tap(self, layer: int, y: torch.Tensor) -> torch.Tensor | None:
        """The heads' outputs of `layer` with its ablated heads' replaced; None where it has none (a tap
        on `Taps.heads`).  # [B, H, N, d] -> same"""
        heads = [h for ablated_layer, h in self.heads if ablated_layer == layer]
        return _ablate(y, heads, self.mode) if heads else None

    def run_options(self) -> dict:
        """`Explorer.run`'s keywords that make a run ablate these heads."""
        return {"ablate": self.heads, "ablate_mode": self.mode}

    def __str__(self) -> str:
        return f"{self.mode} ablation of " + ", ".join(f"{layer}.{head}" for layer, head in self.heads)


def _check_head(config: ModelConfig, pair) -> tuple[int, int]:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ValueError(f"each ablated head is a (layer, head) pair, got {pair!r}")
    layer, head = pair
    for name, value, count in (("layer", layer, config.n_layers), ("head", head, config.n_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise ValueError(
                f"{name} {value!r} of ablated head {tuple(pair)} is out of range: "
                f"this model has {name}s 0 to {count - 1}"
            )
    return layer, head


def _ablate(y: torch.Tensor, heads: list[int], mode: str) -> torch.Tensor:
    """`heads`' outputs zeroed or replaced by their mean over positions.  # [B, H, N, d] -> same"""
    y = y.clone()
    if mode == "zero":
        y[:, heads] = 0
    else:
        y[:, heads] = y[:, heads].mean(dim=-2, keepdim=True)  # [B, h, 1, d] to every position
    return y


@dataclass(frozen=True, eq=False)
class PatchResult:
    """A sweep of head patching from a clean prompt into a corrupted one (float32 CPU tensors). Each
    metric (`patch_metrics.METRICS`: logit difference, the answer's probability, KL from the clean
    run) is in `readings`; the logit difference's are also fields of their own."""

    logit_diff: torch.Tensor  # [L, H] logit(answer) − logit(distractor), corrupted run with (l, h) patched
    recovered: torch.Tensor  # [L, H] (patched − corrupted) / (clean − corrupted)
    clean_logit_diff: float
    corrupted_logit_diff: float
    readings: dict[str, Reading]  # by metric name: patched [L, H], clean, corrupted
    clean_tokens: list[str]  # [N] display strings
    corrupted_tokens: list[str]  # [N]
    answer: str
    distractor: str
    answer_id: int
    distractor_id: int
    first_difference: int  # first position where the prompts' tokens differ
    kv_head: torch.Tensor  # [H] which kv head each query head reads
    seconds: float  # both forwards and the sweep

    @property
    def n_layers(self) -> int:
        return self.logit_diff.shape[0]

    @property
    def n_heads(self) -> int:
        return self.logit_diff.shape[1]

    def top_heads(self, k: int = 5, metric: str = "logit_diff") -> list[tuple[int, int, float]]:
        """The k heads whose patch moves `metric` most either way, as (layer, head, recovered) with its
        sign, largest |recovered| first (ties in layer and head order; an undefined fraction, where
        clean and corrupted agree, last): a head that pushes against the answer ranks as one that
        carries it."""
        recovered = self.readings[metric].recovered.flatten()  # [L·H]
        size = recovered.abs().nan_to_num(nan=-1.0)
        order = torch.argsort(size, descending=True, stable=True)[:k].tolist()
        return [(i // self.n_heads, i % self.n_heads, float(recovered[i])) for i in order]


def single_token(tokenizer, text: str, role: str) -> int:
    """The id of `text` if it is exactly one token (no special tokens added), else a PromptError. Text
    longer than any token can be (`MAX_TOKEN_CHARS`) is refused before the tokenizer reads it, and the
    message quotes the text and its tokens briefly, however long it is."""
    if not isinstance(text, str) or not text:
        raise PromptError(f"The {role} is empty: give one token, e.g. “ Mary” with its leading space.")
    if len(text) > MAX_TOKEN_CHARS:
        raise PromptError(
            f"The {role} is {len(text):,} characters long; one token is at most {MAX_TOKEN_CHARS:,}. "
            "Give a single token of this model's vocabulary, e.g. “ Mary” with its leading space."
        )
    check_characters(text, f"The {role}")
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    if len(ids) != 1:
        tokens = _tokenization(display_tokens(tokenizer, ids))
        raise PromptError(
            f"The {role} “{quoted(text)}” is {len(ids)} tokens ({tokens}): it must be a single token of "
            "this model's vocabulary (mind the leading space)."
        )
    return ids[0]


def _tokenization(tokens: list[str], first: int = 0, most: int = 12) -> str:
    """Tokens as a message lists them: at most `most`, from a little before position `first`, the
    rest counted."""
    start = max(0, min(first - 2, len(tokens) - most))
    shown = " | ".join(f"“{quoted(t)}”" for t in tokens[start : start + most])
    before = f"… {start:,} more | " if start else ""
    after = len(tokens) - start - most
    return before + shown + (f" | … {after:,} more" if after > 0 else "")


@dataclass(kw_only=True)
class _Trace:
    """One prompt's forward as the sweep needs it (model dtype, model device)."""

    layer_inputs: torch.Tensor  # [L, N, hidden] input of each block
    heads: torch.Tensor  # [L, H, N, d] every head's output before o_proj
    cache: KVCache  # every layer's keys and values
    last_hidden: torch.Tensor  # [hidden] final normed hidden state at the last position


def _trace(model: Transformer, ids: list[int]) -> _Trace:
    c, weight = model.config, model.embed_tokens.weight
    n, options = len(ids), dict(dtype=weight.dtype, device=weight.device)
    layer_inputs = torch.empty(c.n_layers, 1, n, c.hidden_size, **options)
    heads = torch.empty(c.n_layers, 1, c.n_heads, n, c.head_dim, **options)
    cache = KVCache(c, n, dtype=weight.dtype, device=weight.device)
    taps = Taps(block_input=recorder(layer_inputs), heads=recorder(heads))
    final = model.hidden_states(torch.tensor([ids], device=weight.device), cache=cache, taps=taps)
    return _Trace(layer_inputs=layer_inputs[:, 0], heads=heads[:, 0], cache=cache, last_hidden=final[0, -1])


@torch.inference_mode()
def patch_heads(
    explorer,
    clean: str,
    corrupted: str,
    answer: str,
    distractor: str,
    progress: Progress | None = None,
    max_tokens: int | None = None,
    metrics: tuple[str, ...] = METRICS,
) -> PatchResult:
    """Patch every head, one at a time, from the clean run into the corrupted one (see the module doc).
    `progress` is called with the fraction of the sweep done (0 to 1) as it goes, layer by layer.
    `metrics`: what is read off each patched run (`patch_metrics.METRICS`; the logit difference always).
    Prompts longer than the context (or `max_tokens`) are refused, not cut: cutting would move the
    position whose logits are read."""
    start = time.perf_counter()
    model, tokenizer = explorer.model, explorer.tokenizer
    answer_id = single_token(tokenizer, answer, "answer")  # (a few characters read: the cheap checks first)
    distractor_id = single_token(tokenizer, distractor, "distractor")
    if answer_id == distractor_id:
        raise PromptError(f"The answer and the distractor are the same token “{quoted(answer)}”.")
    limit = min(explorer.config.context_length, max_tokens or explorer.config.context_length)
    clean_encoded, corrupted_encoded = encode(tokenizer, clean, limit), encode(tokenizer, corrupted, limit)
    for name, encoded in (("clean", clean_encoded), ("corrupted", corrupted_encoded)):
        if encoded.n_dropped or encoded.n_chars_dropped:
            raise PromptError(
                f"The {name} prompt is longer than the {limit:,} tokens a patching sweep takes here: "
                "shorten it (the answer is read at its last position, so it is not cut)."
            )
    if len(clean_encoded.ids) != len(corrupted_encoded.ids):
        pairs = zip(clean_encoded.ids, corrupted_encoded.ids, strict=False)
        first = next(
            (i for i, (a, b) in enumerate(pairs) if a != b),
            min(len(clean_encoded.ids), len(corrupted_encoded.ids)),
        )
        raise PromptError(
            "The clean and corrupted prompts must have the same number of tokens, so that each position "
            f"patches its counterpart. Clean, {len(clean_encoded.ids)} tokens: "
            f"{_tokenization(clean_encoded.tokens, first)}. Corrupted, {len(corrupted_encoded.ids)} tokens: "
            f"{_tokenization(corrupted_encoded.tokens, first)}."
        )
    pairs = zip(clean_encoded.ids, corrupted_encoded.ids, strict=True)
    differ = [i for i, (a, b) in enumerate(pairs) if a != b]
    if not differ:
        raise PromptError("The clean and corrupted prompts are the same tokens: there is nothing to patch.")

    clean_trace, corrupted_trace = _trace(model, clean_encoded.ids), _trace(model, corrupted_encoded.ids)
    states = _sweep(model, corrupted_trace, clean_trace.heads, differ[0], progress)  # [L, H, hidden]
    ends = (clean_trace.last_hidden, corrupted_trace.last_hidden)
    unknown = set(metrics) - set(METRICS)
    if unknown:
        raise ValueError(f"metrics must be among {', '.join(METRICS)}; got {', '.join(sorted(unknown))}")
    readings = read_states(model, states, *ends, answer_id, distractor_id, tuple(metrics))
    diff = readings["logit_diff"]
    return PatchResult(
        logit_diff=diff.patched,
        recovered=diff.recovered,
        clean_logit_diff=diff.clean,
        corrupted_logit_diff=diff.corrupted,
        readings=readings,
        clean_tokens=clean_encoded.tokens,
        corrupted_tokens=corrupted_encoded.tokens,
        answer=answer,
        distractor=distractor,
        answer_id=answer_id,
        distractor_id=distractor_id,
        first_difference=differ[0],
        kv_head=kv_head_map(model.config.n_heads, model.config.n_kv_heads),
        seconds=time.perf_counter() - start,
    )


def _sweep(
    model: Transformer,
    corrupted: _Trace,
    clean_heads: torch.Tensor,
    start: int,
    progress: Progress | None,
) -> torch.Tensor:
    """The final normed state at the last position with each head patched.  # -> [L, H, hidden]

    Only positions `start`..N−1 are recomputed, by the model's forward one block at a time. The batch
    holds one row per patch; rows are ordered (layer, head). Patches of several layers share a pass down
    the model while their activations fit in SWEEP_BUDGET_BYTES.
    """
    c = model.config
    n = corrupted.layer_inputs.shape[1]
    row_bytes = (n - start) * (4 * c.hidden_size + 3 * c.intermediate_size) * corrupted.heads.element_size()
    layers_per_pass = max(1, SWEEP_BUDGET_BYTES // (row_bytes * c.n_heads))
    prefix = PrefixCache(corrupted.cache.k[:, :, :start], corrupted.cache.v[:, :, :start])
    positions = range(start, n)
    firsts = range(0, c.n_layers, layers_per_pass)
    steps, done = sum(c.n_layers - first for first in firsts), 0  # (pass, layer) steps
    passes = []
    for first in deadline.steps(firsts, [c.n_layers - first for first in firsts]):
        patched_layers = range(first, min(first + layers_per_pass, c.n_layers))
        rows = None  # [R, M, hidden] residual stream of every patch so far, positions start..N−1
        for layer in deadline.steps(range(first, c.n_layers)):
            last = layer == c.n_layers - 1  # only the model's last block may drop the other positions
            through = dict(layers=range(layer, layer + 1), positions=positions, cache=prefix, last_only=last)
            if rows is not None:
                rows = model.hidden_states(stream=rows, **through)
            if layer in patched_layers:
                stream = corrupted.layer_inputs[layer, start:].expand(c.n_heads, -1, -1)  # [H, M, hidden]
                taps = Taps(heads=partial(_patched, corrupted.heads, clean_heads))
                joining = model.hidden_states(stream=stream, taps=taps, **through)
                rows = joining if rows is None else torch.cat([rows, joining])
            done += 1
            if progress is not None:
                progress(done / steps)
        final = rows[:, -1]  # [R, hidden] after the final norm
        passes.append(final.view(len(patched_layers), c.n_heads, -1))
    return torch.cat(passes)


def _patched(
    corrupted_heads: torch.Tensor, clean_heads: torch.Tensor, layer: int, y: torch.Tensor
) -> torch.Tensor:
    """A tap on `layer`'s heads' outputs for the H rows that patch one head each: row h holds head h's
    output from the clean run, every other head's from the corrupted run (positions start.., or the last
    alone).  # y [H rows, H, M, d] -> same"""
    first = corrupted_heads.shape[2] - y.shape[2]  # start, or N − 1 in the last block
    heads = corrupted_heads[layer, :, first:]  # [H, M, d]
    n_heads = heads.shape[0]
    patched = heads.expand(n_heads, -1, -1, -1).clone()  # [H rows, H, M, d]
    each = torch.arange(n_heads, device=heads.device)
    patched[each, each] = clean_heads[layer, :, first:]  # row h: head h from the clean run
    return patched
