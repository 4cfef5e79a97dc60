"""What every part of the benchmark shares: the model shapes, a seeded checkpoint of one, the machine's
description, the prompt ids, and a contender measured in a fresh process (`worker`)."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[3]
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
WORKER_TIMEOUT_S = 900
TL_MISSING = (
    "transformer-lens is not installed here nor in .venv-tl (see docs/performance.md); it stays out of "
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
        "cpu": cpu_model(),
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


def write_tables(out: Path, stem: str, results: dict[str, Any], text: str) -> dict[str, Any]:
    """`results` as out/STEM.json and their table `text` as out/STEM.md, printed too."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / f"{stem}.md").write_text(text)
    print(text)
    return results


def cpu_model() -> str:
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
    python: str, contender: str, checkpoint: Path, n: int, args, module: str = "explorer.tools.bench.worker"
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


def token_name(token_id: int) -> str:
    """The word that the benchmark's word-level tokenizer maps to `token_id`."""
    return f"t{token_id}"


def prompt_ids(vocab_size: int, n_tokens: int) -> list[int]:
    """A seeded random prompt: the same N token ids for every contender."""
    generator = torch.Generator().manual_seed(n_tokens)
    return torch.randint(0, vocab_size, (n_tokens,), generator=generator).tolist()
