"""`python -m explorer.bench --lens`: the logit lens, direct logit attribution and `attention_to` against
one fast forward of the same prompt, on the real SmolLM2-135M GGUF (a random-init checkpoint of the same
shape when it is not installed), 256 tokens of English text, float32.

Each measure is the median of several timed calls after a warm-up, in this one process, alternating
with the forward it is compared to (the forward's median is taken over all its calls). Writes
`bench/lens-DEVICE.json` and `.md`.

    python -m explorer.bench --lens [--quick] [--lengths 256]
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from explorer.tools.bench.common import build_checkpoint, machine

N_TOKENS = 256  # the prompt's length unless --lengths gives one
WINDOW = 64  # positions of the windowed grid (the app shows a window past ~128 positions)
TARGETS = {  # measure -> (its largest ratio to one forward, what it does)
    "full grid": (10.0, "`run.logit_lens()`: top-5 and KL at every layer and position"),
    "64-position window": (3.0, "`run.logit_lens(positions=…64 positions…)`"),
    "last position": (0.2, "`run.logit_lens(positions=[-1])`: every layer at the last position"),
    "attribution": (0.5, "`run.logit_attribution(answer, distractor)` at the last position"),
    "attention_to": (None, "`run.attention_to(key)`: every head's weight from the last position"),
}


def measures(run) -> dict[str, Callable[[], object]]:
    n = run.n_tokens
    tokens = run.explorer.tokenizer
    answer = tokens.decode([run.logits[-1].argmax().item()])
    distractor = tokens.decode([run.logits[-1].topk(2).indices[1].item()])
    return {
        "full grid": lambda: run.logit_lens(),
        "64-position window": lambda: run.logit_lens(positions=list(range(n - WINDOW, n))),
        "last position": lambda: run.logit_lens(positions=[-1]),
        "attribution": lambda: run.logit_attribution(answer, distractor),
        "attention_to": lambda: run.attention_to(1),
    }


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(checkpoint: Path, n_tokens: int, device: str, warmups: int, repeats: int) -> dict[str, Any]:
    import explorer
    from explorer.tools.bench.worker import real_text

    ex = explorer.load(checkpoint, device=device)
    text = ex.tokenizer.decode(ex.tokenizer.encode(real_text()).ids[:n_tokens])
    run = ex.run(text)
    forward = lambda: ex.run(text)  # noqa: E731 (a fresh forward each call: a Run caches nothing here)
    forwards, rows = [], {}
    for name, call in measures(run).items():
        for _ in range(warmups):
            call()
        seconds = []
        for _ in range(repeats):  # alternating with the forward, so both see the same machine
            forwards.append(timed(forward))
            seconds.append(timed(call))
        rows[name] = statistics.median(seconds)
    one_forward = statistics.median(forwards)
    return {
        "n_tokens": run.n_tokens,
        "forward_seconds": one_forward,
        "rows": {
            name: {"seconds": s, "ratio": s / one_forward, "target": TARGETS[name][0]}
            for name, s in rows.items()
        },
    }


def markdown(results: dict[str, Any]) -> str:
    m, r = results["machine"], results["measured"]
    lines = [
        f"# The lens against one forward: {results['model']}, N = {r['n_tokens']}",
        "",
        f"{m['cpu']} ({m['device']}), {m['torch_threads']} threads, float32; medians of "
        f"{results['repeats']} calls after {results['warmups']} warm-up. One forward: "
        f"{r['forward_seconds']:.3f} s.",
        "",
        "| measure | what | seconds | × one forward | target | holds |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name, row in r["rows"].items():
        target = row["target"]
        holds = "—" if target is None else ("yes" if row["ratio"] <= target else "**no**")
        target_text = "—" if target is None else f"≤ {target:g}×"
        timing = f"{row['seconds']:.3f} | {row['ratio']:.2f}"
        lines.append(f"| {name} | {TARGETS[name][1]} | {timing} | {target_text} | {holds} |")
    return "\n".join(lines) + "\n"


def main(args) -> dict[str, Any]:
    from explorer.loading.catalog import smollm2_gguf

    n_tokens, repeats = args.lengths[0], args.repeats
    path = smollm2_gguf()
    with tempfile.TemporaryDirectory(prefix="explorer-bench-lens-") as tmp:
        if path is None:  # not installed: a random-init checkpoint of its shape
            path, model = Path(tmp), "a random-init SmolLM2-135M-shaped checkpoint"
            build_checkpoint(path, "smollm2-135m")
        else:
            model = f"{path.name} (real weights)"
        measured = measure(path, n_tokens, args.device, args.warmups, repeats)
    results = {
        "machine": machine(args.device, args.threads),
        "model": model,
        "warmups": args.warmups,
        "repeats": repeats,
        "measured": measured,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"lens-{args.device}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results)
    stem.with_suffix(".md").write_text(text)
    print(text)
    return results
