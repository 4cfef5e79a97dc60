"""What `python -m explorer.bench --lens` and `--flow` share: measures of one Run's readings, each timed
against a baseline (one fast forward of the same prompt, a layer's eager rerun) or in seconds, on the real
SmolLM2-135M GGUF (a random-init checkpoint of the same shape when it is not installed), 256 tokens of
English text, float32.

Each measure is the median of several timed calls after a warm-up, in this one process, each call just
after a call of its baseline. Its ratio is the median of those pairs' ratios, so a pair shares the state
of a noisy machine (a baseline's median in seconds is taken over all its calls). Writes
`bench/NAME-DEVICE.json` and `.md`.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.tools.bench.common import build_checkpoint, machine

N_TOKENS = 256  # the prompt's length unless --lengths gives one


@dataclass(frozen=True)
class Measure:
    name: str
    what: str
    call: Callable[[], object]
    baseline: str | None  # the baseline it is a ratio of; None: measured in seconds
    target: float | None  # its largest ratio (or seconds); None: shown, not held to a target


@dataclass(frozen=True)
class Suite:
    name: str  # the files' stem: bench/NAME-DEVICE.*
    title: str
    baselines: Callable[[Any, str], dict[str, Callable[[], object]]]  # (run, text) -> name: call
    measures: Callable[[Any], list[Measure]]


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(suite: Suite, checkpoint: Path, n_tokens: int, device: str, warmups: int, repeats: int) -> dict:
    import explorer
    from explorer.tools.bench.worker import real_text

    ex = explorer.load(checkpoint, device=device)
    text = ex.tokenizer.decode(ex.tokenizer.encode(real_text()).ids[:n_tokens])
    run = ex.run(text)
    baselines = suite.baselines(run, text)
    baseline_times: dict[str, list[float]] = {name: [] for name in baselines}
    rows = {}
    for m in suite.measures(run):
        for _ in range(warmups):
            m.call()
        seconds, ratios = [], []
        for _ in range(repeats):  # alternating with its baseline, so both see the same machine
            before = None if m.baseline is None else timed(baselines[m.baseline])
            seconds.append(timed(m.call))
            if before is not None:
                baseline_times[m.baseline].append(before)
                ratios.append(seconds[-1] / before)
        rows[m.name] = {"what": m.what, "seconds": statistics.median(seconds), "baseline": m.baseline}
        rows[m.name]["target"] = m.target
        # the median of each call over the baseline just before it: a pair shares the machine's state
        rows[m.name]["ratio"] = statistics.median(ratios) if ratios else None
    medians = {name: statistics.median(times) for name, times in baseline_times.items() if times}
    return {"n_tokens": run.n_tokens, "baselines": medians, "rows": rows}


def markdown(suite: Suite, results: dict[str, Any]) -> str:
    m, r = results["machine"], results["measured"]
    baselines = "; ".join(f"{name}: {seconds:.4f} s" for name, seconds in r["baselines"].items())
    load = "–".join(f"{value:.1f}" for value in results.get("load_average", [])) or "not recorded"
    lines = [
        f"# {suite.title}: {results['model']}, N = {r['n_tokens']}",
        "",
        f"{m['cpu']} ({m['device']}), {m['torch_threads']} threads, float32; medians of "
        f"{results['repeats']} calls after {results['warmups']} warm-up; a ratio is the median over pairs "
        f"(baseline, call). {baselines}. 1-minute load average {load}.",
        "",
        "| measure | what | seconds | × its baseline | target | holds |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name, row in r["rows"].items():
        value, target = (
            (row["seconds"], row["target"]) if row["baseline"] is None else (row["ratio"], row["target"])
        )
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f} ({row['baseline']})"
        unit = " s" if row["baseline"] is None else "×"
        target_text = "—" if target is None else f"≤ {target:g}{unit}"
        holds = "—" if target is None else ("yes" if value <= target else "**no**")
        lines.append(f"| {name} | {row['what']} | {row['seconds']:.3f} | {ratio} | {target_text} | {holds} |")
    return "\n".join(lines) + "\n"


def main(suite: Suite, args) -> dict[str, Any]:
    """SmolLM2 (a random checkpoint of its shape when it is not installed), or with `--model
    gemma3-gguf` Gemma-3-270M; writes bench/NAME-DEVICE.* (NAME-DEVICE-gemma3-gguf.* for Gemma)."""
    import torch

    from explorer.loading.catalog import smollm2_gguf
    from explorer.tools.bench.loading import model_path

    torch.set_num_threads(args.threads)  # the threads the machine line states
    gemma = getattr(args, "model", "random") == "gemma3-gguf"
    path = model_path("gemma3-gguf") if gemma else smollm2_gguf()
    load = [os.getloadavg()[0]]  # other work on a shared machine skews times: kept beside them
    with tempfile.TemporaryDirectory(prefix=f"explorer-bench-{suite.name}-") as tmp:
        if path is None:  # not installed: a random-init checkpoint of its shape
            path, model = Path(tmp), "a random-init SmolLM2-135M-shaped checkpoint"
            build_checkpoint(path, "smollm2-135m")
        else:
            model = f"{path.name} (real weights)"
        measured = measure(suite, path, args.lengths[0], args.device, args.warmups, args.repeats)
    load.append(os.getloadavg()[0])
    results = {
        "machine": machine(args.device, args.threads),
        "model": model,
        "warmups": args.warmups,
        "repeats": args.repeats,
        "measured": measured,
        "load_average": load,  # 1-minute, before and after
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / (f"{suite.name}-{args.device}" + ("-gemma3-gguf" if gemma else ""))
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(suite, results)
    stem.with_suffix(".md").write_text(text)
    print(text)
    return results
