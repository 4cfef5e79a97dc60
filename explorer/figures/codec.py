"""The wire format: what the app sends of a figure, and how its big N×N maps are made small. The one
encoder; its one decoder is the page's (explorer/app/ui/assets/codec.mjs, which says what each rule
means), and both are held to the fixtures under tests/fixtures/codec.

Maps go out as base64 typed arrays (numpy float32 / uint8, which plotly serialises as `bdata`, never
as nested lists): exact float32 while the map fits a byte budget, else one byte per cell, else pooled
into blocks of positions (to half as many cells), with a note saying so. Pooling takes the largest
(or smallest) of each block as a few elementwise passes over strided views, one per position of a
block along each axis, never a reduction over a small axis.

A layer's update carries every other head's pipeline as what differs from the shown head's
(`differences`): the traces that differ, whole, and the layout's and config's keys that differ (its
title, its downloads' name), arrays of those traces deflated (zlib, which the page inflates with the
browser's DecompressionStream): every head of a 256-token layer in 8-bit codes stays under 1 MB. Rebuilt
in the page (`pack.mjs`), head h's figure is the one the server would send for it, byte for byte.
"""

from __future__ import annotations

import base64
import math
import zlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

WIRE_VERSION = 1  # the rules' format, as the page's decoder reads it (codec.mjs `VERSION`)
DEFLATE_FROM_BYTES = 1024  # arrays of a head's difference smaller than this ride as they are
MAP_BUDGET_BYTES = 256 * 256 * 4  # one big map: exact float32 up to 256 tokens, 8-bit up to 512
ALL_HEADS_BUDGET_BYTES = 128 * 1024  # every head's map of a layer together


@dataclass(frozen=True)
class EncodedMap:
    """A [N, N] map ready to send: its values, 8-bit codes, or 8-bit codes of pooled blocks."""

    kind: Literal["probs", "signed"]
    z: np.ndarray  # [cells, cells] float32 values (exact) or uint8 codes
    block: int  # positions per cell along each axis (1: one cell per token)
    exact: bool  # z holds the values themselves
    limit: float  # probs: 1; signed: max |value|, the colour scale runs over ±limit

    @property
    def note(self) -> str:
        """What a person should know about the precision, or '' when exact."""
        if self.exact:
            return ""
        if self.block == 1:
            return "colours and hover in 8 bits"
        return f"pooled into {self.block}×{self.block} blocks, colours in 8 bits"


def encode_probs(probs: np.ndarray, budget_bytes: int = MAP_BUDGET_BYTES, exact: bool = True) -> EncodedMap:
    """Probabilities [N, N]: float32; else whole percents in uint8; else block maxima in percent.
    `exact=False`: codes even where float32 would fit the budget."""
    if exact and probs.size * 4 <= budget_bytes:
        return EncodedMap("probs", probs.astype(np.float32), block=1, exact=True, limit=1.0)
    block = block_for(probs.shape[0], budget_bytes)
    return probs_codes(pool(probs, block, "max"), block)


def probs_codes(pooled: np.ndarray, block: int) -> EncodedMap:
    """Block maxima of probabilities (`pool` with "max") as whole percents in uint8."""
    percent = np.rint(np.nan_to_num(pooled) * 100).astype(np.uint8)
    return EncodedMap("probs", percent, block=block, exact=False, limit=1.0)


def encode_signed(
    values: np.ndarray, limit: float | None = None, budget_bytes: int = MAP_BUDGET_BYTES, exact: bool = True
) -> EncodedMap:
    """Real values [N, N], −inf allowed: float32 (−inf as NaN, a gap); else codes 1..255 over ±limit
    in uint8 (−inf as 0); else each block's most extreme finite value, coded the same way.
    `limit` defaults to max |finite value|; the colour scale runs over ±limit, 0 at its centre.
    `exact=False`: codes even where float32 would fit the budget."""
    finite = np.where(np.isfinite(values), values, np.nan).astype(np.float32)
    if limit is None:
        limit = signed_limit(finite)
    limit = max(limit, 1e-12)
    if exact and values.size * 4 <= budget_bytes:
        return EncodedMap("signed", finite, block=1, exact=True, limit=limit)
    block = block_for(values.shape[0], budget_bytes)
    return signed_codes(pool(finite, block, "extreme"), block, limit)


def signed_limit(values: np.ndarray) -> float:
    """max |finite value| (NaN for −∞ or a pooled gap), 1 when there is none: the colour scale's reach."""
    return float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0


def signed_codes(pooled: np.ndarray, block: int, limit: float) -> EncodedMap:
    """Values (NaN for a gap) as codes 1..255 over ±limit in uint8, 0 for a gap."""
    limit = max(limit, 1e-12)
    codes = np.nan_to_num(np.rint(128 + 127 * np.clip(pooled / limit, -1, 1)), nan=0).astype(np.uint8)
    return EncodedMap("signed", codes, block=block, exact=False, limit=limit)


def encode_mask(mask: np.ndarray, budget_bytes: int = MAP_BUDGET_BYTES // 4) -> tuple[np.ndarray, int]:
    """The causal mask [N, N] bool as uint8 (1: may attend), and its block size. A quarter of a map's
    budget: beyond 256 tokens it is pooled, while the hatched region still draws its exact edge."""
    block = block_for(mask.shape[0], budget_bytes)
    return np.nan_to_num(pool(mask.astype(np.float32), block, "max")).astype(np.uint8), block


def causal_mask_codes(n_tokens: int, budget_bytes: int = MAP_BUDGET_BYTES // 4) -> tuple[np.ndarray, int]:
    """`encode_mask` of the causal mask of `n_tokens`, without the [N, N] mask: a block of queries
    I and keys J may attend when its first key comes at or before its last query."""
    block = block_for(n_tokens, budget_bytes)
    cells = np.arange(math.ceil(n_tokens / block))
    last_query = np.minimum((cells + 1) * block - 1, n_tokens - 1)
    return (cells[None, :] * block <= last_query[:, None]).astype(np.uint8), block


def block_for(n_positions: int, budget_cells: int) -> int:
    """Positions per cell along each axis so that a map of `n_positions` fits `budget_cells` (8-bit
    cells). A map that must be pooled at all gets half the cells an unpooled 8-bit one may have: its
    cells are already smaller than a screen pixel on a panel (the zoom window shows exact values), and
    the update stays small (a 2,048-token pipeline view: 0.5 MB, not 1.4)."""
    if n_positions**2 > budget_cells:
        budget_cells //= 2
    block = 1
    while math.ceil(n_positions / block) ** 2 > budget_cells:
        block += 1
    return block


def pool(values: np.ndarray, block: int, reduce: Literal["max", "extreme"]) -> np.ndarray:
    """[..., R, C] -> [..., ceil(R/b), ceil(C/b)] float32: each b×b block's largest value ("max"), or
    its value of largest magnitude, sign kept ("extreme": a block mean would fade a map of mixed signs
    to grey; of two of equal magnitude, the positive one), over its finite values; NaN and −∞ are
    gaps, and a block of gaps alone pools to NaN. Rows pooled a block of queries at a time line up
    with the whole map's when each block of rows starts at a multiple of b."""
    x = np.asarray(values, dtype=np.float32)
    if block == 1:
        return x
    if reduce == "max":
        high = _largest(x, block)
        high[high == -math.inf] = math.nan
        return high
    return most_extreme(*pool_bounds(x, block))


def _largest(x: np.ndarray, block: int) -> np.ndarray:
    """Each b×b block's largest value, gaps left out (−∞ for a block of gaps alone)."""
    high = _pool_reduce(x, block, np.fmax, -math.inf)  # fmax leaves NaN out; −∞ never wins
    high[np.isnan(high)] = -math.inf  # a block of NaN alone
    return high


def pool_bounds(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Each b×b block's largest and smallest finite value (−∞ and ∞ for a block of gaps alone), as
    `pool` finds them.  # [..., R, C] float32 -> ([..., ceil(R/b), ceil(C/b)],) × 2"""
    high = _largest(x, block)
    low = _pool_reduce(x, block, np.fmin, math.inf)  # fmin leaves NaN out, not −∞
    if np.isneginf(low).any():  # −∞ won a min: leave it out (checked pooled, redone if so)
        low = _pool_reduce(np.where(np.isneginf(x), math.inf, x), block, np.fmin, math.inf)
    low[np.isnan(low)] = math.inf  # a block of NaN alone
    return high, low


def most_extreme(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The value of largest magnitude of each block from its bounds, sign kept (the positive one of
    two of equal magnitude); NaN for a block of gaps alone."""
    extreme = np.where(-low > high, low, high)
    extreme[high == -math.inf] = math.nan
    return extreme


def _pool_reduce(x: np.ndarray, block: int, ufunc: np.ufunc, pad: float) -> np.ndarray:
    """`ufunc` (np.fmax or np.fmin) over each b×b block of the last two dims, padded with `pad` where
    the last blocks reach past them: across each row first, b strided views of it at a time, then down
    the columns.  # [..., R, C] -> [..., ceil(R/b), ceil(C/b)]"""
    *lead, rows, cols = x.shape
    row_cells, col_cells = math.ceil(rows / block), math.ceil(cols / block)
    if (rows, cols) != (row_cells * block, col_cells * block):
        widths = [(0, 0)] * len(lead) + [(0, row_cells * block - rows), (0, col_cells * block - cols)]
        x = np.pad(x, widths, constant_values=pad)
    across = x[..., 0::block].copy()  # [..., R, C/b]
    for k in range(1, block):
        ufunc(across, x[..., k::block], out=across)
    down = across[..., 0::block, :].copy()  # [..., R/b, C/b]
    for k in range(1, block):
        ufunc(down, across[..., k::block, :], out=down)
    return down


# --- traces as sent: rules the page rebuilds a map by (codec.mjs `rebuild`) ---------------------------


def scaled_rule(source: int, by: float) -> dict:
    """A map that is float32(trace `source`'s × float32(by)), as torch multiplies."""
    return dict(derived=dict(op="scale", source=source, by=float(np.float32(by))))


def same_rule(source: int) -> dict:
    """A map that holds trace `source`'s values (8-bit codes relative to each panel's own limit)."""
    return dict(derived=dict(op="same", source=source))


def causal_rule(source: int, fill: float | None) -> dict:
    """A map that is trace `source`'s where the key is at or before the query, `fill` above (None: a
    gap)."""
    return dict(derived=dict(op="causal", source=source, fill=fill))


def angles_rule(positions: int, inv_freq: np.ndarray) -> dict:
    """RoPE's angles float32(m × θ_i) for m < `positions`, wrapped to (−π, π] (`rope.wrap_angle`)."""
    return dict(derived=dict(op="angles", positions=positions, inv_freq=np.float32(inv_freq).tolist()))


def packed_rule(fill: float) -> dict:
    """A square map sent as its lower triangle, row by row; every cell above holds `fill`."""
    return dict(packed=dict(op="tril", fill=fill))


def weighted_rule(sums: np.ndarray, norms: np.ndarray) -> dict:
    """A weighted softmax map whose hover, [α, ‖α·v·W_O‖] a cell, follows from each row's sum
    Σ ‖α·v·W_O‖ [R] and each key's ‖v·W_O‖ [K] (`maps.KeyWrites`)."""
    return dict(weighted=dict(sums=np.asarray(sums, np.float32), norms=np.asarray(norms, np.float32)))


def compact_trace(trace: dict) -> dict:
    """A trace (as `figures.sendable` gives it) as the app sends it: a `derived` map left out, a
    `packed` one as its lower triangle, and a `weighted` map's hover data left out."""
    meta = trace.get("meta") or {}
    if meta.get("weighted"):
        trace = {key: value for key, value in trace.items() if key != "customdata"}
    if meta.get("derived"):
        return {key: value for key, value in trace.items() if key != "z"}
    if meta.get("packed"):
        z = map_array(trace["z"])  # [N, N]
        rows, cols = np.tril_indices(len(z))
        lower = np.ascontiguousarray(z[rows, cols])  # [N(N+1)/2]
        return trace | {"z": {"dtype": lower.dtype.str[1:], "bdata": base64.b64encode(lower).decode()}}
    return trace


def lower_triangle_fill(z) -> float | None:
    """The one value every cell above the diagonal of a square map holds (a causal map's 0), or None
    when there is none: then the map cannot be sent as its lower triangle."""
    z = np.asarray(z)
    if z.ndim != 2 or z.shape[0] != z.shape[1] or len(z) < 2:
        return None
    above = z[np.triu_indices(len(z), 1)]
    if not np.isfinite(above[0]) or not np.all(above == above[0]):
        return None
    return above[0].item()


def map_array(z) -> np.ndarray:
    """A map as Plotly's JSON holds it (typed-array `bdata`, or nested lists) as a numpy array."""
    if isinstance(z, dict) and "bdata" in z:
        flat = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        return flat.reshape([int(n) for n in str(z["shape"]).split(",")]) if "shape" in z else flat
    return np.asarray(z)


def deflated(value):
    """`value` (a figure's parts as sent) with each typed array of DEFLATE_FROM_BYTES or more as its
    zlib-compressed bytes, base64, marked `deflate`."""
    if isinstance(value, list):
        return [deflated(v) for v in value]
    if not isinstance(value, dict):
        return value
    bdata = value.get("bdata")
    if isinstance(bdata, str) and len(bdata) * 3 // 4 >= DEFLATE_FROM_BYTES:
        packed = zlib.compress(base64.b64decode(bdata), 6)
        return value | {"bdata": base64.b64encode(packed).decode(), "deflate": True}
    return {key: deflated(v) for key, v in value.items()}


def differences(shown: dict, others: dict[int, dict]) -> list[dict | None]:
    """Each head's figure (`others`, by head, as sent) as what differs from the shown head's, deflated;
    None for the shown head."""
    heads = [None] * (len(others) + 1)
    for h, plot in others.items():
        heads[h] = deflated(difference(shown, plot))
    return heads


def difference(base: dict, other: dict) -> dict:
    """What turns figure `base` into `other` (both as sent): each trace that differs, whole, by its
    index; the layout's and config's top-level keys that differ (a key gone from `other` as None)."""
    if len(base["data"]) != len(other["data"]):
        raise ValueError("every head's pipeline has the same traces")
    data = {str(i): b for i, (a, b) in enumerate(zip(base["data"], other["data"], strict=True)) if a != b}
    return {"data": data, **{part: _keys(base[part], other[part]) for part in ("layout", "config")}}


def _keys(base: dict, other: dict) -> dict:
    changed = {key: value for key, value in other.items() if base.get(key) != value}
    return changed | {key: None for key in base.keys() - other.keys()}
