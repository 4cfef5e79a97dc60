"""One layer's attention a block of queries at a time, for prompts whose [H, N, N] maps are too big to
hold: each block's rows are the one attention's (`Projections.rows`, `explorer.engine.rows`), computed
from the layer's projections (linear in N), reduced to what a view shows, and dropped before the
next block. Peak memory is one block of rows, whatever N. (The heads' scores go block by block too:
`explorer.engine.heads.prompt_profile`.)

    query_blocks    the blocks of queries whose rows fit a byte budget
    head_rows       one head's scores, scaled, masked and probs for a block of queries   # each [R, N]
    layer_pass      in one pass: the heads' similarity, the output, each block to pool
"""

from __future__ import annotations

import torch

from explorer.engine.attention import Projections
from explorer.engine.model import Attention
from explorer.engine.rows import CELL
from explorer.engine.taps import Tap, tapped


def query_blocks(n_tokens: int, n_heads: int, budget_bytes: int, multiple: int = 1) -> list[tuple[int, int]]:
    """(start, stop) of consecutive blocks of queries whose float32 rows over all N keys, for `n_heads`
    heads, take at most `budget_bytes`; each block a multiple of `multiple` rows (so pooled cells of
    that size line up with the whole map's), and at least that many."""
    rows = budget_bytes // (4 * n_heads * n_tokens) // multiple * multiple
    rows = max(rows, multiple)
    return [(start, min(start + rows, n_tokens)) for start in range(0, n_tokens, rows)]


@torch.inference_mode()
def head_rows(p: Projections, head: int, start: int, stop: int) -> dict[str, torch.Tensor]:
    """One head's stages for queries start..stop−1, as `AttentionInternals.head_stages` gives them
    for the whole map.  # each [stop − start, N]"""
    rows = p.rows(range(start, stop), head)
    return {name: getattr(rows, name)[0] for name in ("scores", "scaled", "masked", "probs")}


@torch.inference_mode()
def layer_pass(
    p: Projections,
    budget_bytes: int,
    attn: Attention | None = None,
    on_rows=None,
    heads_tap: Tap | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One pass over the layer's softmax maps, a block of queries at a time: the cosine similarity of
    every pair of heads' maps (each map a vector of N·N values), the attention output if `attn` is
    given (the heads' outputs, linear in N, edited by `heads_tap` as an ablated run's are), and each
    block handed to `on_rows(start, probs)` (to pool it) before it is dropped. A block's rows stop at
    its last query's key: the keys after it, all 0, are neither computed nor pooled.
    # probs [H, R, stop] -> [H, H], [N, hidden] float32 CPU or None"""
    gram = torch.zeros(p.n_heads, p.n_heads, dtype=torch.float64)
    heads_out = []  # [H, R, d] per block
    # blocks of whole cells of the one attention: its rows, and the output, come out as the whole layer's
    for start, stop in query_blocks(p.n_tokens, p.n_heads, budget_bytes, CELL):
        rows = p.rows(range(start, stop), n_keys=stop)  # the keys after the block's last query are 0
        probs = rows.probs  # [H, R, stop]
        flat = probs.reshape(p.n_heads, -1)  # [H, R·stop]
        gram += (flat @ flat.T).double()
        if attn is not None:
            heads_out.append(rows.mix(p.v))  # [H, R, d]
        if on_rows is not None:
            on_rows(start, probs)
    norms = gram.diagonal().sqrt()
    similarity = (gram / (norms[:, None] * norms[None, :])).float()
    if attn is None:
        return similarity, None
    every = tapped(heads_tap, p.layer, torch.cat(heads_out, dim=1)[None])  # [1, H, N, d]
    weight = attn.o_proj.weight
    merged = attn.merge_heads(every.to(weight.device, weight.dtype))[0]  # [N, hidden]
    return similarity, merged.float().cpu()
