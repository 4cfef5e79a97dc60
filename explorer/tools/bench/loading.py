"""`python -m explorer.bench --load`: loading a real GGUF file (SmolLM2-135M, or Gemma-3-270M with
`--model gemma3-gguf`), ours against transformers reading the same file. Writes `bench/load-DEVICE-MODEL.*`.

Each contender loads the file in a fresh process, the contenders in turn (A B C A B C …), so that each
round shares the machine's state. A process imports torch, then times its load alone (the imports are
the same for all, and outside the time) and reports that time, its own CPU seconds and its peak
resident memory:

- ours: `explorer.load(path)` with the tokenizer already in the user's cache (every load but the first);
- ours, first load: the same with an empty cache, so transformers builds the tokenizer from the file;
- transformers: `AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=float32)` and
  `AutoTokenizer.from_pretrained(dir, gguf_file=...)`, as a person loads a GGUF file with it.

    python -m explorer.bench --load [--model gemma3-gguf] [--repeats 3]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from explorer.tools.bench.common import REPO, WORKER_TIMEOUT_S, machine

CONTENDERS = {
    "ours": "ours: `explorer.load(path)`, the tokenizer read from the user's cache",
    "ours-first": "ours, first load: the tokenizer built by transformers from the file, then cached",
    "transformers": "transformers: `from_pretrained(gguf_file=...)`, the model and the tokenizer",
}
TARGET_SECONDS = 10.0  # ours, on a 2-core CPU


def load_once(contender: str, path: Path) -> dict[str, Any]:
    """In this process: load `path` as `contender` does; the load's seconds, CPU seconds, peak RSS."""
    import torch

    torch.set_grad_enabled(False)
    if contender == "transformers":
        from transformers import AutoModelForCausalLM, AutoTokenizer
    else:
        import explorer
    cpu, start = time.process_time(), time.perf_counter()
    if contender == "transformers":
        AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    else:
        explorer.load(path, device="cpu")
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,
        "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def run_contender(contender: str, path: Path) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="explorer-bench-cache-") as empty:
        if contender == "ours-first":
            env["EXPLORER_CACHE_DIR"] = empty
        command = [sys.executable, "-m", "explorer.tools.bench.loading", contender, str(path)]
        load = os.getloadavg()[0]
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
        )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return {"status": "failed", "reason": lines[-1] if lines else f"exit status {done.returncode}"}
    return {"status": "ok", "load_average": load, **json.loads(done.stdout.strip().splitlines()[-1])}


def model_path(name: str) -> Path:
    from explorer.loading.catalog import GEMMA3_INSTALL, SMOLLM2_INSTALL, gemma3_gguf, smollm2_gguf

    if name == "gemma3-gguf":
        path, install = gemma3_gguf(), GEMMA3_INSTALL
    else:
        path, install = smollm2_gguf(), SMOLLM2_INSTALL
    if path is None:
        raise SystemExit(f"The model is not installed: {install}")
    return path


def main(args) -> dict[str, Any]:
    name = "gemma3-gguf" if args.model == "gemma3-gguf" else "smollm2-gguf"
    path = model_path(name)
    run_contender("ours", path)  # the tokenizer in the cache, and the file in the page cache
    rounds = []
    for _ in range(args.repeats):
        rounds.append({contender: run_contender(contender, path) for contender in CONTENDERS})
        print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    results = {"machine": machine("cpu", args.threads), "model": path.name, "rounds": rounds}
    results["summary"] = summary(rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"load-cpu-{name}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results)
    stem.with_suffix(".md").write_text(text)
    print(text)
    return results


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for contender in CONTENDERS:
        rows = [r[contender] for r in rounds if r[contender]["status"] == "ok"]
        if rows:
            out[contender] = {
                key: statistics.median(row[key] for row in rows)
                for key in ("seconds", "cpu_seconds", "peak_bytes", "load_average")
            } | {"min_seconds": min(row["seconds"] for row in rows), "runs": len(rows)}
    return out


def markdown(results: dict[str, Any]) -> str:
    m, s = results["machine"], results["summary"]
    lines = [
        f"# Loading {results['model']}: ours against transformers",
        "",
        f"{m['cpu']}, {m['logical_cores']} cores, torch {m['torch']}, transformers {m['transformers']}, "
        f"{m['date']}; each load in a fresh process, the contenders in turn; medians of "
        f"{len(results['rounds'])} rounds (imports outside the time).",
        "",
        "| contender | load (median) | quickest | CPU seconds | peak memory | 1-min load average |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for contender, what in CONTENDERS.items():
        if contender in s:
            row = s[contender]
            times = f"{row['seconds']:.2f} s | {row['min_seconds']:.2f} s | {row['cpu_seconds']:.2f}"
            lines.append(
                f"| {what} | {times} | {row['peak_bytes'] / 2**20:,.0f} MiB | {row['load_average']:.1f} |"
            )
    if "ours" in s:
        holds = "holds" if s["ours"]["seconds"] <= TARGET_SECONDS else "does not hold"
        lines += ["", f"Target: ours ≤ {TARGET_SECONDS:g} s: {holds} here."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(json.dumps(load_once(sys.argv[1], Path(sys.argv[2]))))
