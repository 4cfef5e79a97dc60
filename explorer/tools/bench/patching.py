"""What a head-patching sweep costs, against one forward per head: `python -m explorer.tools.bench.patching`
(also a section of `python -m explorer.bench`).

The benchmark's SmolLM2-shaped random-init checkpoint (`common.build_checkpoint`) and pairs of 20-token
prompts (its word-level tokenizer: `t123 t4 …` are the ids) that differ in one token. Where they
differ matters: the positions before the first difference are the same in both runs and are not
recomputed (`explorer.engine.interventions`). So each row puts the difference elsewhere:
- IOI shape: 2/3 into the prompt, where the issue's example (“When Mary and John went to the store, John
  gave a drink to”, its corrupted prompt swapping the second name) has its second name; the target row;
- middle: halfway;
- first token: at position 0, so every position is recomputed; the worst case.

One forward is `ex.run(corrupted)`: our fast forward, which keeps each layer's input and computes no
logits. The sweep is `ex.patch_heads(clean, corrupted, answer, distractor)`, all of it: tokenization,
the clean and corrupted forwards, and every (layer, head) patch. Each timed repeat runs one forward and
one sweep back to back (a busy machine slows both alike); the ratio is median sweep / (L · H · median
forward). The 1-minute load average is recorded as each row starts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from explorer.tools.bench.common import REPO, SHAPES, build_checkpoint, prompt_ids, token_name

N_TOKENS = 20
TARGET_RATIO = 0.35  # sweep ≤ 0.35 × (L · H × one forward), on the IOI-shaped pair
PAIRS = {  # row -> position of the one token that differs, as a function of N
    "IOI shape (differ at 2N/3)": lambda n: 2 * n // 3,
    "middle (differ at N/2)": lambda n: n // 2,
    "first token (differ at 0)": lambda n: 0,
}
TARGET_ROW = "IOI shape (differ at 2N/3)"


def prompt_pair(vocab_size: int, n_tokens: int, differ_at: int) -> tuple[str, str, str, str]:
    """Clean and corrupted prompts (seeded random ids, one changed), and answer and distractor tokens."""
    ids = prompt_ids(vocab_size, n_tokens)
    corrupted = list(ids)
    corrupted[differ_at] = (ids[differ_at] + 1) % vocab_size
    words = [" ".join(token_name(i) for i in prompt) for prompt in (ids, corrupted)]
    answer, distractor = (f" {token_name(i)}" for i in (ids[0], ids[1]))
    return words[0], words[1], answer, distractor


def measure(explorer_, n_tokens: int, warmups: int, repeats: int) -> list[dict[str, Any]]:
    """Every row of the table, measured on one loaded model."""
    c = explorer_.config
    rows = []
    for name, position in PAIRS.items():
        differ_at = position(n_tokens)
        clean, corrupted, answer, distractor = prompt_pair(c.vocab_size, n_tokens, differ_at)
        load = os.getloadavg()[0]
        for _ in range(warmups):
            explorer_.run(corrupted)
            explorer_.patch_heads(clean, corrupted, answer, distractor)
        forward, sweep = [], []
        for _ in range(repeats):
            forward.append(_seconds(explorer_.run, corrupted))
            sweep.append(_seconds(explorer_.patch_heads, clean, corrupted, answer, distractor))
        per_head = c.n_layers * c.n_heads * statistics.median(forward)
        rows.append(
            {
                "pair": name,
                "n_tokens": n_tokens,
                "differ_at": differ_at,
                "forward_seconds": statistics.median(forward),
                "sweep_seconds": statistics.median(sweep),
                "all_forward_seconds": forward,
                "all_sweep_seconds": sweep,
                "ratio": statistics.median(sweep) / per_head,
                "load_average": load,
            }
        )
    return rows


def _seconds(call, *args) -> float:
    start = time.perf_counter()
    call(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def results_for(checkpoint: Path, device: str, threads: int, warmups: int, repeats: int) -> dict[str, Any]:
    import explorer

    torch.set_num_threads(threads)
    ex = explorer.load(checkpoint, device=device)
    rows = measure(ex, N_TOKENS, warmups, repeats)
    target = next(row for row in rows if row["pair"] == TARGET_ROW)
    return {
        "status": "ok",
        "device": device,
        "threads": threads,
        "layers": ex.config.n_layers,
        "heads": ex.config.n_heads,
        "warmups": warmups,
        "repeats": repeats,
        "rows": rows,
        "target": {"rule": f"sweep / (L·H × forward) <= {TARGET_RATIO}", "pair": TARGET_ROW},
        "met": target["ratio"] <= TARGET_RATIO,
    }


def markdown(patching: dict[str, Any]) -> str:
    if patching["status"] != "ok":
        return f"Head-patching sweep: not measured ({patching['reason']}).\n"
    layers, heads = patching["layers"], patching["heads"]
    lines = [
        f"Head-patching sweep, {layers} layers × {heads} heads = {layers * heads} patches, "
        f"{patching['rows'][0]['n_tokens']}-token prompt pairs differing in one token, on "
        f"{patching['device']} with {patching['threads']} torch thread(s); median of "
        f"{patching['repeats']} (forward, sweep) repeats after {patching['warmups']} warm-up.",
        "",
        "| pair | first difference | one forward `ex.run` | sweep `ex.patch_heads` | "
        "sweep / (L·H × forward) | load |",
        "|---|---|---|---|---|---|",
    ]
    for row in patching["rows"]:
        lines.append(
            f"| {row['pair']} | {row['differ_at']} | {row['forward_seconds'] * 1e3:.1f} ms | "
            f"{row['sweep_seconds']:.3g} s | {row['ratio']:.3f} | {row['load_average']:.2f} |"
        )
    verdict = "yes" if patching["met"] else "**no**"
    target = patching["target"]
    lines += [
        "",
        f"Target {target['rule']} on the {target['pair']} pair: {verdict}.",
        "",
        "- One forward: `ex.run(corrupted)`, our fast forward (keeps each layer's input, no logits). The "
        "sweep: both prompts' forwards and every patch. Positions before the first difference are not "
        "recomputed, so the ratio falls as the prompts share more of their beginning.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="python -m explorer.tools.bench.patching",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="1 timed repeat")
    parser.add_argument("--shape", choices=SHAPES, default="smollm2-135m")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5; 1 with --quick)")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 5)
    with tempfile.TemporaryDirectory(prefix="explorer-bench-") as tmp:
        build_checkpoint(Path(tmp), args.shape)
        patching = results_for(Path(tmp), args.device, args.threads, args.warmups, repeats)
    patching["shape"] = args.shape
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"patching-{args.device}"
    stem.with_suffix(".json").write_text(json.dumps(patching, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(patching))
    print(markdown(patching))
    return patching


if __name__ == "__main__":
    main()
