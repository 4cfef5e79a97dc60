"""Generation, one token at a time, from a KV cache: each new token and the attention row that chose it.

    prefill  the prompt's P positions through SDPA at once (causal); every layer's rotated keys and values
             go into the cache
    step k   query position q = P − 1 + k (step 0 is the prefill's last row): in every layer its row of the
             attention map, softmax(q·Kᵀ·scale) over keys 0..q, from the cached keys (O(N·d) per head,
             every layer in one batched product);
             the final logits -> the next token, which then goes through the model alone, one position,
             through SDPA against the cache

The cache (`explorer.engine.kv_cache.KVCache`) holds rotated keys and values of the kv heads only,
preallocated to the length the generation can reach. The prefill and each step are the model's one forward
(`Transformer.hidden_states`) at their positions, with that cache; its taps keep each block's input
([L, capacity, hidden]), so the finished sequence becomes a Run, with every other view, without a second
forward, and each layer's last query, from which the step's attention rows are read.

Sampling follows transformers' warpers: logits / temperature, then top-k, then top-p, drawn with a
`torch.Generator` of its own (the global RNG is never touched). Temperature 0 is greedy.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch

from explorer.engine.config import ModelConfig
from explorer.engine.edits import Edits
from explorer.engine.kv_cache import KVCache
from explorer.engine.rows import attention_rows
from explorer.engine.run import Run
from explorer.engine.taps import NO_TAPS, Taps
from explorer.engine.tokens import display_tokens, encode, next_token_labels
from explorer.errors import PromptError

TOP_CANDIDATES = 10


class Candidate(NamedTuple):
    id: int
    token: str  # display string
    probability: float  # the model's, at temperature 1, before any warping


@dataclass(frozen=True, eq=False)
class Step:
    """One new token, the query row that chose it, and what else the model considered."""

    index: int  # k, counting from 0
    position: int  # q = P − 1 + k: the query position whose logits chose the token
    id: int
    token: str  # display string, as explorer.engine.tokens makes it
    probability: float  # the model's probability of `id` (temperature 1, before any warping)
    candidates: list[Candidate]  # the model's most likely next tokens, most likely first, before sampling
    attention: torch.Tensor  # [L, H, q+1] float32 CPU: row q of every layer's and head's softmax map


def step_rows(
    queries: torch.Tensor, keys: torch.Tensor, scale: float, windows: list[int | None], taps: Taps = NO_TAPS
) -> torch.Tensor:
    """The last query's softmax row in every layer and head, from the cached keys of the kv heads: the
    one attention (`explorer.engine.rows`) over every layer at once, each layer masked by its own
    window (None: causal); a layer whose scores `taps` edit or knock out, again alone with them, as the
    forward attended. # queries [L, H, d] after RoPE, keys [L, H_kv, N, d] -> [L, H, N] float32

    Each kv head's group of queries meets its keys in one product over every layer, no key copied: one
    product and one softmax a step, not one per layer (at a step's sizes each enters a parallel region,
    which on a busy machine costs a scheduler tick).
    """
    position = torch.tensor([keys.shape[-2] - 1], device=keys.device)
    rows = attention_rows(queries.float()[:, :, None], keys.float(), position, scale, windows).probs[:, :, 0]
    for layer in range(len(windows)):
        if taps.stagewise_at(layer) or taps.blocked(layer, position, keys.shape[-2]) is not None:
            q, k = (
                queries[layer, None, :, None].float(),
                keys[layer, None].float(),
            )  # [1, H, 1, d], [1, H_kv, N, d]
            rows[layer] = attention_rows(q, k, position, scale, windows[layer], layer, taps).probs[0, :, 0]
    return rows


def sampling_probs(
    logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None
) -> torch.Tensor:
    """The distribution a sampled step draws from, as transformers' warpers make it: logits / temperature,
    then all but the top-k set to −∞ (ties with the k-th kept), then all but the smallest set of most
    likely tokens whose probability reaches top_p (at least one kept).  # [vocab] -> [vocab] float32"""
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None and top_p < 1.0:
        ascending_logits, order = torch.sort(logits)
        drop_sorted = ascending_logits.softmax(-1).cumsum(-1) <= 1 - top_p
        drop_sorted[-1] = False
        logits = logits.masked_fill(drop_sorted.scatter(0, order, drop_sorted), -math.inf)
    return logits.softmax(-1)


def check_settings(
    max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None, seed: int
) -> None:
    """A clear ValueError for each setting out of range."""
    if not _is_int(max_new_tokens) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a whole number ≥ 1, got {max_new_tokens!r}")
    if not _is_real(temperature) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a number ≥ 0 (0: greedy), got {temperature!r}")
    if top_k is not None and (not _is_int(top_k) or top_k < 1):
        raise ValueError(f"top_k must be a whole number ≥ 1, or None for no top-k, got {top_k!r}")
    if top_p is not None and (not _is_real(top_p) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1], or None for no top-p, got {top_p!r}")
    if not _is_int(seed):
        raise ValueError(f"seed must be a whole number, got {seed!r}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Generation:
    """One prompt's generation. Iterate it (once) for its Steps; break out to stop early.

    `ids`, `tokens` and `steps` grow as steps are taken; `run` is the sequence so far as a Run.
    `stop_reason` says why it ended: "eos", "context" (the model's context is full), "max_tokens" (the
    sequence reached the `max_tokens` it was allowed) or "max_new_tokens";
    None while it runs, or when the caller stopped it.
    """

    def __init__(
        self,
        explorer,
        prompt: str,
        *,
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
        max_tokens: int | None = None,
        edits=None,
    ):
        check_settings(max_new_tokens, temperature, top_k, top_p, seed)
        config = explorer.config
        context = min(config.context_length, max_tokens or config.context_length)  # prompt + new tokens
        encoded = encode(explorer.tokenizer, prompt, context)
        n_prompt = len(encoded.ids) + encoded.n_dropped
        if n_prompt >= context:
            holds = "the model's context holds" if context == config.context_length else "a sequence may have"
            raise PromptError(
                f"The prompt has {n_prompt if not encoded.n_chars_dropped else f'over {n_prompt}'} tokens "
                f"and {holds} {context}: shorten it to leave room for at least one new token."
            )
        self.max_tokens = context
        # checked against the prompt (negative positions count from its end), then at every new position
        self.edits = Edits.parse(config, edits, len(encoded.ids), growing=True)
        self.explorer = explorer  # the Explorer that generates
        self.prompt_ids: list[int] = encoded.ids  # [P]
        self.ids: list[int] = list(encoded.ids)  # [P + steps so far]
        self.tokens: list[str] = list(encoded.tokens)  # display strings, one per id
        self.steps: list[Step] = []
        self.stop_reason: str | None = None
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_k, self.top_p = float(temperature), top_k, top_p
        if not stop_at_eos:
            eos_token_id = None
        elif eos_token_id is None:
            eos_token_id = config.eos_token_id
        self.eos_token_id = eos_token_id  # None: nothing stops it but the context and max_new_tokens
        self.seconds = 0.0  # time spent in the model so far

        device, dtype = explorer.device, explorer.dtype
        capacity = min(len(self.ids) + max_new_tokens, context)
        self.cache = KVCache(config, capacity, dtype=dtype, device=device)
        inputs_shape = (config.n_layers, capacity, config.hidden_size)
        self.layer_inputs = torch.empty(inputs_shape, dtype=dtype, device=device)  # [L, capacity, hidden]
        self.final_hidden = torch.empty(capacity, config.hidden_size, dtype=dtype, device=device)  # normed
        self._generator = torch.Generator(device).manual_seed(seed)
        self._logits: torch.Tensor | None = None  # [vocab] float32 after the last position fed
        self._rows: torch.Tensor | None = None  # [L, H, length] float32 CPU: that position's rows
        self._started = False
        self._run: Run | None = None

    @property
    def config(self) -> ModelConfig:
        return self.explorer.config

    @property
    def n_prompt(self) -> int:
        return len(self.prompt_ids)

    def __iter__(self) -> Iterator[Step]:
        if self._started:
            raise RuntimeError("A generation runs once; call ex.generate(...) again for another.")
        self._started = True
        return self._steps()

    def _steps(self) -> Iterator[Step]:
        for k in range(self.max_new_tokens):
            self._feed_pending()
            step = self._choose(k)
            self.steps.append(step)
            self.ids.append(step.id)
            self.tokens.append(step.token)
            self.stop_reason = self._stop_reason(step)
            yield step
            if self.stop_reason is not None:
                return

    def _stop_reason(self, step: Step) -> str | None:
        if self.eos_token_id is not None and step.id == self.eos_token_id:
            return "eos"
        if len(self.ids) >= self.max_tokens:
            return "context" if self.max_tokens == self.config.context_length else "max_tokens"
        if step.index == self.max_new_tokens - 1:
            return "max_new_tokens"
        return None

    def _choose(self, k: int) -> Step:
        logits = self._logits  # [vocab] float32
        if self.temperature == 0:
            chosen = int(logits.argmax())
        else:
            probs = sampling_probs(logits, self.temperature, self.top_k, self.top_p)
            chosen = int(torch.multinomial(probs, 1, generator=self._generator))
        model_probs = logits.softmax(-1).cpu()  # [vocab]
        top = model_probs.topk(min(TOP_CANDIDATES, model_probs.numel()))
        top_ids = top.indices.tolist()
        # Each as it reads after the sequence so far (it may finish a character begun before it).
        *top_tokens, token = next_token_labels(self.explorer.tokenizer, self.ids, [*top_ids, chosen])
        candidates = [
            Candidate(i, t, p) for i, t, p in zip(top_ids, top_tokens, top.values.tolist(), strict=True)
        ]
        return Step(
            index=k,
            position=self.n_prompt - 1 + k,
            id=chosen,
            token=token,
            probability=float(model_probs[chosen]),
            candidates=candidates,
            attention=self._rows,
        )

    def _feed_pending(self) -> None:
        """Run the ids not yet in the cache through the model: the prompt once, then one token at a time."""
        if self.cache.length < len(self.ids):
            start = time.perf_counter()
            self._feed(self.ids[self.cache.length :])
            if self.explorer.device.type == "cuda":
                torch.cuda.synchronize()
            self.seconds += time.perf_counter() - start

    @torch.inference_mode()
    def _feed(self, new_ids: list[int]) -> None:
        """Positions start..end−1 through the model's forward, their K and V into the cache, each block's
        input kept; then the logits and every layer's attention row of the last position."""
        model, config = self.explorer.model, self.config
        start, end = self.cache.length, self.cache.length + len(new_ids)
        shape = (config.n_layers, config.n_heads, config.head_dim)
        queries = torch.empty(shape, dtype=self.explorer.dtype, device=self.explorer.device)  # [L, H, d]

        def keep_input(layer: int, x: torch.Tensor) -> None:  # x [1, n, hidden]
            self.layer_inputs[layer, start:end] = x[0]

        def keep_query(layer: int, q: torch.Tensor) -> None:  # q [1, H, n, d] after RoPE
            queries[layer] = q[0, :, -1]

        ids = torch.tensor([new_ids], device=self.explorer.device)  # [1, n]
        taps = Taps(block_input=keep_input, queries=keep_query)
        written = NO_TAPS if self.edits is None else self.edits.taps(range(start, end))
        taps = written.then(taps)  # the edits first: the block inputs kept are the edited ones
        hidden = model.hidden_states(ids, positions=range(start, end), cache=self.cache, taps=taps)[0]
        self.final_hidden[start:end] = hidden  # [n, hidden]
        self.cache.length = end
        self._logits = model.logits(hidden[-1]).float()  # [vocab]
        scale, windows = model.layers[0].self_attn.scale, [block.self_attn.window for block in model.layers]
        self._rows = step_rows(
            queries, self.cache.k[:, :, :end], scale, windows, written
        ).cpu()  # [L, H, end]

    @property
    def run(self) -> Run:
        """The prompt and the tokens generated so far, as a Run that every view works on.

        Built from the block inputs the generation kept: the newest token goes through the model here
        (one position, as a step would), so the Run has the logits after it; no second forward."""
        self._feed_pending()
        n = len(self.ids)
        if self._run is None or self._run.n_tokens != n:
            self._run = Run(
                self.explorer,
                ids=list(self.ids),
                tokens=display_tokens(
                    self.explorer.tokenizer, self.ids
                ),  # characters named whole, in context
                layer_inputs=self.layer_inputs[:, :n],
                final_hidden=self.final_hidden[:n],
                forward_seconds=self.seconds,
                edits=self.edits,
            )
        return self._run
