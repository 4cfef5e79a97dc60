"""Many prompts in padded batches through the one forward: `run_batch` (a Run each, as `Explorer.run`
makes it) and `cache` (chosen taps at chosen positions of any number of texts, streamed into arrays).

Padding goes on the right of each row, and rows are grouped by length (longest first) so a batch pads
little. The model is causal: a real token never attends to a pad after it, and RoPE counts from 0 in
every row, so each real position computes what it computes alone; the pads' own outputs are dropped.
That is padding masked in every layer with no mask tensor, and SDPA stays causal (one kernel call per
layer for the whole batch). Edits are read against each item (a negative position from its own end);
items whose edits write the same positions share a batch, which the edits' taps write on as one
(`edit_groups`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from explorer.engine.edits import Edits
from explorer.engine.run import Run
from explorer.engine.taps import NO_TAPS, Taps, recorder
from explorer.engine.tokens import Encoded, encode, encode_ids

CACHE_TAPS = ("resid", "z", "q", "k", "v", "mlp")  # what `cache` reads: [hidden] or [heads, d] a position


def encoded(explorer, items: Sequence, max_tokens: int | None = None, labelled: bool = True) -> list[Encoded]:
    """Each item, a text or a list of token ids, as the model reads it (`Explorer.run`'s rules); with
    its tokens' display strings where `labelled`."""
    config = explorer.config
    limit = min(max_tokens or config.context_length, config.context_length)
    if isinstance(items, str) or not isinstance(items, Sequence) or not items:
        raise ValueError("give a list of texts or of token-id lists, at least one")
    return [
        encode(explorer.tokenizer, item, limit, labelled)
        if isinstance(item, str)
        else encode_ids(explorer.tokenizer, item, limit, config.vocab_size, labelled)
        for item in items
    ]


def batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices into `lengths`, longest first, in groups of at most `batch_size`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padded(id_lists: list[list[int]], device) -> torch.Tensor:
    """The rows padded on the right (with id 0, never read by a real position).  # -> [B, N_max]"""
    width = max(len(ids) for ids in id_lists)
    return torch.tensor([ids + [0] * (width - len(ids)) for ids in id_lists], device=device)


def edit_groups(config, every: list[Encoded], edits) -> list[tuple[list[int], list[Edits | None]]]:
    """The items in groups whose edits write the same positions (and, where a value has a position
    dimension, of one length), each item's edits read against it: (indices, their edits). A bad edit
    raises ValueError naming the item."""
    groups: dict[tuple, list[int]] = {}
    parsed: list[Edits | None] = []
    for i, e in enumerate(every):
        try:
            item = Edits.parse(config, edits, len(e.ids))
        except ValueError as error:
            raise ValueError(f"item {i}: {error}") from None
        parsed.append(item)
        resolved = item.resolved if item is not None else []
        by_position = any(isinstance(r.value, torch.Tensor) and r.value.shape[-2] > 1 for r in resolved)
        key = (tuple(r.positions for r in resolved), len(e.ids) if by_position else None)
        groups.setdefault(key, []).append(i)
    return [(members, [parsed[i] for i in members]) for members in groups.values()]


@torch.inference_mode()
def run_batch(
    explorer, items: Sequence, batch_size: int = 16, max_tokens: int | None = None, edits=None
) -> list[Run]:
    """A Run for each item (in order), from one padded forward per batch (module doc); `edits` as
    `Explorer.run` takes them, read against each item."""
    every = encoded(explorer, items, max_tokens)
    config, model = explorer.config, explorer.model
    runs: list[Run | None] = [None] * len(every)
    for members, parsed in edit_groups(config, every, edits):
        edits_of = dict(zip(members, parsed, strict=True))
        for group in batches([len(every[i].ids) for i in members], batch_size):
            group = [members[j] for j in group]
            ids = padded([every[i].ids for i in group], explorer.device)  # [B, N]
            b, n = ids.shape
            inputs = torch.empty(
                config.n_layers, b, n, config.hidden_size, dtype=explorer.dtype, device=ids.device
            )
            written = edits_of[group[0]]  # the group's: the same positions in every row
            # the edits first: the block inputs kept are the edited ones
            taps = (NO_TAPS if written is None else written.taps(range(n))).then(
                Taps(block_input=recorder(inputs))
            )
            start = time.perf_counter()
            final = model.hidden_states(ids, taps=taps)  # [B, N, hidden]
            if explorer.device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            tokens = sum(len(every[i].ids) for i in group)
            for row, i in enumerate(group):
                e, m = every[i], len(every[i].ids)
                runs[i] = Run(  # each holds its own rows, not a view keeping the batch alive
                    explorer,
                    ids=e.ids,
                    tokens=e.tokens,
                    layer_inputs=inputs[:, row, :m].clone(),
                    final_hidden=final[row, :m].clone(),
                    forward_seconds=seconds * m / tokens,  # its share of the batch's forward
                    n_dropped=e.n_dropped,
                    n_chars_dropped=e.n_chars_dropped,
                    edits=edits_of[i],
                )
    return runs


def _check_taps(config, taps) -> list[tuple[str, int]]:
    checked = []
    for tap in taps:
        if not isinstance(tap, (tuple, list)) or len(tap) != 2:
            raise ValueError(f"each tap is (name, layer), e.g. ('resid', 10), got {tap!r}")
        name, layer = tap
        if name not in CACHE_TAPS:
            raise ValueError(f"unknown tap {name!r}; cache reads {', '.join(CACHE_TAPS)}")
        last = config.n_layers if name == "resid" else config.n_layers - 1
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= last:
            raise ValueError(f"tap {name!r}: layer must be an integer in [0, {last}], got {layer!r}")
        checked.append((name, layer))
    if not checked or len(set(checked)) != len(checked):
        raise ValueError("give at least one tap, each once")
    return checked


def _row_positions(positions, length: int, index: int) -> list[int]:
    """A row's positions: each given one, negative from its end.  # -> [P]"""
    picked = [positions] if isinstance(positions, int) else list(positions)
    out = []
    for p in picked:
        if isinstance(p, bool) or not isinstance(p, int):
            raise ValueError(f"positions are whole numbers, got {p!r}")
        absolute = p + length if p < 0 else p
        if not 0 <= absolute < length:
            raise ValueError(f"position {p} is outside text {index}'s {length} tokens")
        out.append(absolute)
    if not out:
        raise ValueError("give at least one position")
    return out


@torch.inference_mode()
def cache(
    explorer,
    texts: Sequence,
    taps: Sequence[tuple[str, int]],
    positions: int | Sequence[int] = -1,
    batch_size: int = 16,
    max_tokens: int | None = None,
    progress: bool | Callable[[float], object] = True,
) -> dict[tuple[str, int], np.ndarray]:
    """What each tap holds at `positions` of every text (or token-id list), float32: {tap: [T, ...]}
    with [...] = [hidden] (resid, mlp) or [heads, d] (z, q; k and v per kv head), and a positions axis
    after T where `positions` is a list. The arrays are allocated once and filled a batch at a time: a
    run holds the batch's forward and them, never the texts' whole activations. `progress`: a tqdm bar
    on stderr (True), none (False), or a callable told the fraction done."""
    config, model = explorer.config, explorer.model
    checked = _check_taps(config, taps)
    every = encoded(explorer, texts, max_tokens, labelled=False)
    chosen = [_row_positions(positions, len(e.ids), i) for i, e in enumerate(every)]
    many = not isinstance(positions, int)
    heads = {"z": config.n_heads, "q": config.n_heads, "k": config.n_kv_heads, "v": config.n_kv_heads}
    out = {}
    for name, layer in checked:
        shape = (config.hidden_size,) if name in ("resid", "mlp") else (heads[name], config.head_dim)
        out[name, layer] = np.empty((len(every), *((len(chosen[0]),) if many else ()), *shape), np.float32)
    groups = batches([len(e.ids) for e in every], batch_size)
    bar = _bar(progress, len(every))
    deepest = max(_point(config, name, layer)[1] for name, layer in checked)  # no block after it runs
    for group in groups:
        ids = padded([every[i].ids for i in group], explorer.device)  # [B, N]
        gather = _Gather(out, group, torch.tensor([chosen[i] for i in group], device=ids.device), many)
        fields: dict[str, list] = {}
        for name, layer in checked:
            point, at = _point(config, name, layer)
            fields.setdefault(point, []).append(gather.tap(name, layer, at))
        model.hidden_states(
            ids, layers=range(deepest + 1), taps=Taps(**{p: _all(t) for p, t in fields.items()})
        )
        bar(len(group))
    bar(None)
    return out


class _Gather:
    """One batch's rows of each tap, at each row's positions, written into the arrays `cache` returns."""

    def __init__(self, out: dict, group: list[int], rows: torch.Tensor, many: bool):
        self.out, self.group, self.rows, self.many = out, group, rows, many  # rows [B, P]
        self.batch = torch.arange(len(group), device=rows.device)[:, None]  # [B, 1]

    def tap(self, name: str, layer: int, at: int) -> Callable:
        def read(called: int, value: torch.Tensor) -> None:
            if called != at:
                return
            if name not in ("resid", "mlp"):  # [B, heads, N, d] -> [B, N, heads, d]
                value = value.transpose(1, 2)
            got = value[self.batch, self.rows].float().cpu().numpy()  # [B, P, ...]
            self.out[name, layer][self.group] = got if self.many else got[:, 0]

        return read


def _point(config, name: str, layer: int) -> tuple[str, int]:
    """The `Taps` field that reads a cache tap, and the layer it is called with."""
    if name == "resid":
        return ("block_input", layer) if layer < config.n_layers else ("block_output", layer - 1)
    return {"z": "heads", "q": "q", "k": "k", "v": "v", "mlp": "mlp_output"}[name], layer


def _all(taps: list) -> Callable:
    def every(layer: int, value: torch.Tensor) -> None:
        for tap in taps:
            tap(layer, value)

    return every


def _bar(progress, total: int) -> Callable[[int | None], None]:
    """A counter of texts done: advanced by a count, closed by None."""
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="text", desc="cache")
        return lambda done: bar.close() if done is None else bar.update(done)
    if callable(progress):
        count = [0]

        def tell(done):
            if done is not None:
                count[0] += done
                progress(count[0] / total)

        return tell
    return lambda done: None
