"""A patching sweep to take away, with the clean prompt's direct logit attribution beside it: an .npz of
plain numeric and unicode arrays (it loads with `numpy.load(path)`, no pickles), and a .csv with a row
a head. Names follow the Python API's: `PatchResult.readings[metric]` and `run.logit_attribution`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from explorer.engine.interventions import PatchResult
from explorer.engine.lens import Attribution


def sweep_arrays(result: PatchResult, direct: Attribution) -> dict[str, np.ndarray]:
    """Every metric's patched values and recovered fractions [L, H] and its clean and corrupted values,
    the direct effects (heads [L, H], MLPs and o_proj biases [L], the embedding), the prompts' tokens
    and the two tokens."""
    arrays: dict[str, np.ndarray] = {}
    for name, reading in result.readings.items():
        arrays[f"{name}_patched"] = reading.patched.numpy()
        arrays[f"{name}_recovered"] = reading.recovered.numpy()
        arrays[f"{name}_clean_corrupted"] = np.array([reading.clean, reading.corrupted], dtype=np.float32)
    arrays |= {
        "direct_heads": direct.heads.numpy(),
        "direct_mlps": direct.mlps.numpy(),
        "direct_biases": direct.biases.numpy(),
        "direct_embedding": np.array(direct.embedding, dtype=np.float32),
        "kv_head": result.kv_head.numpy().astype(np.int64),
        "clean_tokens": np.array([str(t) for t in result.clean_tokens], dtype=np.str_),
        "corrupted_tokens": np.array([str(t) for t in result.corrupted_tokens], dtype=np.str_),
        "answer_distractor": np.array([result.answer, result.distractor], dtype=np.str_),
    }
    return arrays


def sweep_bytes(result: PatchResult) -> int:
    """At most how many bytes the sweep takes as .npz or .csv: up to 16 bytes a value (a float32, or
    "%.9g" and its comma) for every head's row, each token list as long as its longest token times
    four bytes a character (numpy's unicode arrays), and 16 KiB for the headers and the zip's own."""
    values = result.n_layers * result.n_heads * (2 * len(result.readings) + 4)
    lists = (result.clean_tokens, result.corrupted_tokens, (result.answer, result.distractor))
    text = sum(len(tokens) * max((len(str(t)) for t in tokens), default=0) for tokens in lists)
    return 16 * values + 4 * text + 16_384


def write_sweep_npz(result: PatchResult, direct: Attribution, path: Path) -> Path:
    np.savez(path, **sweep_arrays(result, direct))
    return path


def write_sweep_csv(result: PatchResult, direct: Attribution, path: Path) -> Path:
    """A row a head: layer, head, kv head, each metric's patched value and recovered fraction, and the
    head's direct effect; the clean and corrupted values first, as comment lines."""
    names = list(result.readings)
    kv = result.kv_head.tolist()
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        for name, reading in result.readings.items():
            writer.writerow([f"# {name}: clean {reading.clean:.9g}, corrupted {reading.corrupted:.9g}"])
        writer.writerow(
            ["layer", "head", "kv_head"]
            + [f"{name}_{part}" for name in names for part in ("patched", "recovered")]
            + ["direct_effect"]
        )
        for layer in range(result.n_layers):
            for head in range(result.n_heads):
                values = []
                for name in names:
                    reading = result.readings[name]
                    values += [float(reading.patched[layer, head]), float(reading.recovered[layer, head])]
                direct_effect = float(direct.heads[layer, head])
                writer.writerow([layer, head, kv[head], *(f"{v:.9g}" for v in (*values, direct_effect))])
    return path
