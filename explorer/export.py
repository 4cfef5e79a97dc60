"""What a person can take away: one layer's tensors as .npz, one head's map as .csv.

The arrays are the Python API's own (`run.attention(layer)`), float32, written without pickles: an
.npz of plain numeric and unicode arrays loads with `numpy.load(path)` (allow_pickle stays False).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from explorer.run import Run

MAX_EXPORT_BYTES = 512 * 2**20  # an .npz past this is refused (2,048 tokens × 9 heads is 453 MB)
LAYER_FIELDS = ("probs", "scores", "masked", "q", "k", "q_rot", "k_rot", "angles", "kv_head")


def layer_arrays(run: Run, layer: int) -> dict[str, np.ndarray]:
    """Every stage of `layer`'s attention and the tokens, as numpy, named as in the Python API."""
    att = run.attention(layer)
    size = sum(getattr(att, name).numel() * 4 for name in LAYER_FIELDS)
    if size > MAX_EXPORT_BYTES:
        raise ValueError(
            f"Layer {layer}'s tensors for {run.n_tokens} tokens would be {size / 2**20:,.0f} MiB, above "
            f"the {MAX_EXPORT_BYTES / 2**20:,.0f} MiB an export may hold; use a shorter prompt, or the "
            "Python API."
        )
    arrays = {name: getattr(att, name).numpy() for name in LAYER_FIELDS}
    arrays["kv_head"] = arrays["kv_head"].astype(np.int64)
    arrays["ids"] = np.array(run.ids, dtype=np.int64)
    arrays["tokens"] = np.array([str(t) for t in run.tokens], dtype=np.str_)
    return arrays


def write_layer_npz(run: Run, layer: int, path: Path) -> Path:
    np.savez(path, **layer_arrays(run, layer))
    return path


def write_head_csv(run: Run, layer: int, head: int, path: Path) -> Path:
    """One head's softmax map: a row per query, a column per key, headed "position:token"."""
    probs = run.attention(layer).head_stages(head)["probs"].numpy()  # [N, N]
    names = [f"{i}:{token}" for i, token in enumerate(run.tokens)]
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow([f"layer {layer} head {head}: query \\ key", *names])
        for name, row in zip(names, probs, strict=True):
            writer.writerow([name, *(f"{p:.9g}" for p in row)])
    return path
