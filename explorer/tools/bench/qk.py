"""`python -m explorer.bench --qk`: a score split into its sources (`run.score_attribution`), a row's key
drivers (`run.key_drivers`) and the composition of every pair of heads, against one fast forward of the
same prompt (`explorer.tools.bench.against`), each at the last layer (every earlier source), then the
peak memory of the first two at 2,048 tokens. Writes `bench/qk-DEVICE.*`.

    python -m explorer.bench --qk [--lengths 256]
"""

from __future__ import annotations

import gc
import json

import torch

from explorer.tools.bench import against
from explorer.tools.bench.against import Measure, Suite

FORWARD = "one forward"
MEMORY_TOKENS = 2048


def baselines(run, text: str) -> dict:
    return {FORWARD: lambda: run.explorer.run(text)}  # a fresh forward each call


def measures(run) -> list[Measure]:
    from explorer.engine.composition import composition_scores

    layer, n = run.config.n_layers - 1, run.n_tokens
    return [
        Measure(
            "score table",
            f"`run.score_attribution({layer}, 0, {n - 1}, {n // 2})`: every source × every source",
            lambda: run.score_attribution(layer, 0, n - 1, n // 2),
            FORWARD,
            0.1,
        ),
        Measure(
            "key drivers",
            f"`run.key_drivers({layer}, 0, {n - 1})`: every key-side source at every key",
            lambda: run.key_drivers(layer, 0, n - 1),
            FORWARD,
            0.3,
        ),
        Measure(
            "composition",
            "Q-, K- and V-composition of every pair of heads, from the weights (not the kept result)",
            lambda: composition_scores(run.explorer.model),
            None,
            1.0,
        ),
    ]


SUITE = Suite("qk", "A score split into its sources, against one forward", baselines, measures)


def peak_memory(path, device: str) -> dict[str, int]:
    """Peak memory above the baseline while each reading runs at the last layer of a 2,048-token run
    (the worker's measure: the kernel's high-water mark on CPU)."""
    import explorer
    from explorer.tools.bench.worker import PeakMemory, real_text

    ex = explorer.load(path, device=device)
    text = ex.tokenizer.decode(ex.tokenizer.encode(real_text()).ids[:MEMORY_TOKENS])
    run = ex.run(text)
    layer, n = run.config.n_layers - 1, run.n_tokens
    readings = {
        "score table": lambda: run.score_attribution(layer, 0, n - 1, n // 2),
        "key drivers": lambda: run.key_drivers(layer, 0, n - 1),
    }
    run.projections(layer)  # kept by the run whoever reads the layer first
    peaks = {"n_tokens": n}
    for name, call in readings.items():
        memory = PeakMemory(device)
        with torch.inference_mode():
            memory.reset()
            call()
            peaks[name] = memory.peak_extra()
        gc.collect()
    return peaks


def main(args) -> dict:
    from explorer.loading.catalog import smollm2_gguf

    results = against.main(SUITE, args)
    path = smollm2_gguf()
    if path is None:
        return results
    peaks = peak_memory(path, args.device)
    results["peak_memory"] = peaks
    stem = args.out / f"{SUITE.name}-{args.device}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "",
        f"Peak memory above the run, at the last layer of {peaks['n_tokens']:,} tokens (one layer's "
        "writes at a time; every head's write at every position would be 30 × 9 × N × 576 floats):",
        "",
        "| reading | peak extra |",
        "|---|---:|",
        *(f"| {name} | {peaks[name] / 2**20:.1f} MiB |" for name in ("score table", "key drivers")),
    ]
    with stem.with_suffix(".md").open("a") as file:
        file.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return results
