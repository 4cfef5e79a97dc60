"""What a person can take away: one layer's tensors as .npz, one head's map as .csv.

The arrays are the Python API's own (`run.attention(layer)`), float32, written without pickles: an
.npz of plain numeric and unicode arrays loads with `numpy.load(path)` (allow_pickle stays False).
A layer's size is checked before it is computed; a head's map past `max_map_bytes` (the app's view
budget) is written a block of queries at a time, never held whole.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from explorer.engine import blockwise
from explorer.engine.run import Run

MAX_EXPORT_BYTES = 512 * 2**20  # an .npz past this is refused (2,048 tokens × 9 heads is 453 MB)
LAYER_FIELDS = ("probs", "scores", "masked", "q", "k", "q_rot", "k_rot", "angles", "kv_head")
QK_NORM_FIELDS = ("q_normed", "k_normed")  # a model with QK-norm (qwen3) adds its stage


def layer_arrays(run: Run, layer: int) -> dict[str, np.ndarray]:
    """Every stage of `layer`'s attention and the tokens, as numpy, named as in the Python API."""
    size = layer_bytes(run)
    if size > MAX_EXPORT_BYTES:
        raise ValueError(
            f"Layer {layer}'s tensors for {run.n_tokens} tokens would be {size / 2**20:,.0f} MiB, above "
            f"the {MAX_EXPORT_BYTES / 2**20:,.0f} MiB an export may hold; use a shorter prompt, or the "
            "Python API."
        )
    att = run.attention(layer)
    fields = LAYER_FIELDS + (QK_NORM_FIELDS if run.config.qk_norm else ())
    arrays = {name: getattr(att, name).numpy() for name in fields}
    arrays["kv_head"] = arrays["kv_head"].astype(np.int64)
    arrays["ids"] = np.array(run.ids, dtype=np.int64)
    arrays["tokens"] = np.array([str(t) for t in run.tokens], dtype=np.str_)
    return arrays


def layer_bytes(run: Run) -> int:
    """Bytes of a layer's LAYER_FIELDS for this run, from the config alone (nothing computed)."""
    config, n = run.config, run.n_tokens
    maps = 3 * config.n_heads * n * n  # probs, scores, masked: [H, N, N]
    stages = 3 if config.qk_norm else 2  # q, q_rot (and q_normed); the same for k
    projections = stages * (config.n_heads + config.n_kv_heads) * n * config.head_dim
    return 4 * (maps + projections + n * config.head_dim // 2 + config.n_heads)  # angles, kv_head


def head_csv_bytes(run: Run) -> int:
    """At most how many bytes a head's map takes as .csv (`write_head_csv`): up to 16 characters a value
    ("%.9g" and its comma) and the position:token headers."""
    header = sum(len(str(t).encode()) + 8 for t in run.tokens)
    return run.n_tokens * (run.n_tokens * 16 + 2) + 2 * header


def write_layer_npz(run: Run, layer: int, path: Path) -> Path:
    np.savez(path, **layer_arrays(run, layer))
    return path


def write_head_csv(run: Run, layer: int, head: int, path: Path, max_map_bytes: int | None = None) -> Path:
    """One head's softmax map: a row per query, a column per key, headed "position:token". When the
    layer's [H, N, N] maps pass `max_map_bytes`, the rows are computed a block of queries at a time."""
    names = [f"{i}:{token}" for i, token in enumerate(run.tokens)]
    whole = max_map_bytes is None or run.config.n_heads * run.n_tokens**2 * 4 <= max_map_bytes
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow([f"layer {layer} head {head}: query \\ key", *names])
        if whole:
            blocks = [(0, run.attention(layer).head_stages(head)["probs"].numpy())]  # [N, N]
        else:
            p = run.projections(layer)
            blocks = (
                (start, blockwise.head_rows(p, head, start, stop)["probs"].numpy())  # [R, N]
                for start, stop in blockwise.query_blocks(run.n_tokens, 1, max_map_bytes // 4)
            )
        for start, rows in blocks:
            for name, row in zip(names[start : start + len(rows)], rows, strict=True):
                writer.writerow([name, *(f"{p:.9g}" for p in row)])
    return path
