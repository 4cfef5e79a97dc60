"""`python -m explorer.bench --generate`: tokens per second of our generation, recording every layer's
attention rows, against transformers' `generate` (SDPA, greedy), on the benchmark's checkpoint.

A prompt of 64 seeded random ids, then 32 new tokens, greedy, with the end-of-sequence token off on both
sides (random weights could stop either early), so both make the same tokens, which is checked. Each
contender runs in a fresh process (this module is also the worker), in alternating rounds, with warm-up
and several timed calls; a contender's time is the median over its rounds' calls, and the load average is
kept beside each round. Writes `bench/generate-DEVICE.json` and `.md`.

    python -m explorer.bench --generate [--quick] [--shape tiny]
    python -m explorer.tools.bench.generate CONTENDER CHECKPOINT_DIR PROMPT_TOKENS [--device D ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from explorer.tools.bench.common import SHAPES, build_checkpoint, machine, run_worker, token_name
from explorer.tools.bench.worker import Contender, hf_model
from explorer.tools.bench.worker import main as worker_main

PROMPT_TOKENS, NEW_TOKENS = 64, 32
TARGET = 1.0  # our tokens per second over transformers'
HEADINGS = {  # contender -> its row in the table
    "ours": "`ex.generate`, KV cache, every layer's rows recorded",
    "hf_generate": "transformers `generate`, SDPA, greedy",
}


def ours(path: Path, ids: list[int], device: str) -> Contender:
    import explorer

    ex = explorer.load(path, device=device)
    text = " ".join(token_name(i) for i in ids)

    def step():
        generation = ex.generate(text, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
        for _ in generation:  # each step holds its [L, H, q+1] rows; the generation keeps every step
            pass
        return generation

    return Contender(step, lambda generation: generation.ids[len(ids) :])


def hf_generate(path: Path, ids: list[int], device: str) -> Contender:
    model = hf_model(path, "sdpa", device)
    model.generation_config.eos_token_id = None
    x = torch.tensor([ids], device=device)

    def step():
        return model.generate(x, do_sample=False, max_new_tokens=NEW_TOKENS, pad_token_id=0)

    return Contender(step, lambda out: out[0, len(ids) :].tolist())


WORKERS = {"ours": ours, "hf_generate": hf_generate}


def measure_all(checkpoint: Path, args) -> list[dict[str, Any]]:
    rows = []
    for round_ in range(args.rounds):
        for contender in HEADINGS:
            row = run_worker(
                sys.executable, contender, checkpoint, PROMPT_TOKENS, args, "explorer.tools.bench.generate"
            )
            if row["status"] == "ok":
                row["new_ids"] = row.pop("next_token")
            rows.append({"contender": contender, "round": round_, **row})
            status = f"{row['seconds']:.3f} s" if row["status"] == "ok" else row["reason"]
            print(f"generate round {round_} {contender:<12} {status}", file=sys.stderr, flush=True)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each contender's median over all its timed calls, tokens per second, and the ratio to the target."""
    per_contender = {}
    for contender in HEADINGS:
        ok = [row for row in rows if row["contender"] == contender and row["status"] == "ok"]
        if ok:
            seconds = statistics.median(s for row in ok for s in row["all_seconds"])
            per_contender[contender] = {
                "seconds": seconds,
                "tokens_per_second": NEW_TOKENS / seconds,
                "peak_extra_bytes": max(row["peak_extra_bytes"] for row in ok),
            }
    new_ids = {json.dumps(row["new_ids"]) for row in rows if row["status"] == "ok"}
    ratio = None
    if len(per_contender) == len(HEADINGS):
        ratio = per_contender["ours"]["tokens_per_second"] / per_contender["hf_generate"]["tokens_per_second"]
    return {
        "contenders": per_contender,
        "same_tokens": len(new_ids) == 1,
        "ratio": ratio,
        "target": {"rule": f"ours / transformers tokens per second >= {TARGET}", "met": _met(ratio)},
    }


def _met(ratio: float | None) -> bool | None:
    return None if ratio is None else ratio >= TARGET


def markdown(results: dict[str, Any]) -> str:
    m, setup, rows, s = results["machine"], results["setup"], results["rows"], results["summary"]
    loads = [row["load_average"] for row in rows if row["status"] == "ok"]
    lines = [
        f"Generation: {setup['shape']}-shaped model, random init, float32, on {m['device']}; "
        f"{m['cpu']}, {m['torch_threads']} torch threads; torch {m['torch']}, transformers "
        f"{m['transformers']}; {m['date']}.",
        f"A {setup['prompt_tokens']}-token prompt, then {setup['new_tokens']} new tokens, greedy. Each "
        f"contender in a fresh process per round, {setup['rounds']} alternating rounds of "
        f"{setup['repeats']} timed calls after {setup['warmups']} warm-up; the median over all its calls. "
        f"1-minute load average as each round started: "
        f"{f'{min(loads):.2f}–{max(loads):.2f}' if loads else '—'}.",
        "",
        "| contender | seconds per call (prefill + 32 steps) | tokens / s | peak extra memory |",
        "|---|---|---|---|",
    ]
    for contender, heading in HEADINGS.items():
        c = s["contenders"].get(contender)
        cells = (
            [
                f"{c['seconds']:.3g} s",
                f"{c['tokens_per_second']:.3g}",
                f"{c['peak_extra_bytes'] / 2**20:,.0f} MiB",
            ]
            if c
            else ["—", "—", "—"]
        )
        lines.append(f"| {heading} | " + " | ".join(cells) + " |")
    met = s["target"]["met"]
    verdict = "not measured" if met is None else f"{'yes' if met else '**no**'} ({s['ratio']:.3g})"
    lines += [
        "",
        f"Target: {s['target']['rule']}: {verdict}. Both made the same {setup['new_tokens']} tokens: "
        f"{'yes' if s['same_tokens'] else '**no**'}.",
        *(
            f"- Round {row['round']} of {row['contender']} failed: {row['reason']}"
            for row in rows
            if row["status"] != "ok"
        ),
    ]
    return "\n".join(lines) + "\n"


def main(args) -> dict[str, Any]:
    """The generation benchmark, with `explorer.bench`'s parsed arguments."""
    rounds = 1 if args.quick else 2
    args = argparse.Namespace(**{**vars(args), "rounds": rounds})
    with tempfile.TemporaryDirectory(prefix="explorer-bench-generate-") as tmp:
        checkpoint = Path(tmp)
        build_checkpoint(checkpoint, args.shape)
        rows = measure_all(checkpoint, args)
    results = {
        "machine": machine(args.device, args.threads),
        "setup": {
            "shape": args.shape,
            **SHAPES[args.shape],
            "dtype": "float32",
            "prompt_tokens": PROMPT_TOKENS,
            "new_tokens": NEW_TOKENS,
            "warmups": args.warmups,
            "repeats": args.repeats,
            "rounds": rounds,
        },
        "rows": rows,
    }
    results["summary"] = summary(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"generate-{args.device}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(results))
    print(markdown(results))
    return results


if __name__ == "__main__":
    worker_main(contenders=WORKERS)  # one contender, measured alone; `next_token` holds its new ids
