"""`python -m explorer.train` (or `python -m explorer.tools.training`): train the bundled model, a small
GQA Llama, on a plain-text corpus.

    python -m explorer.train --corpus ../shared/data/tinyshakespeare.txt --out assets/shakespeare-gqa

The last 10% of the corpus is held out. A byte-level BPE tokenizer is trained on the rest, then the
project's own `explorer.engine.model.Transformer`. Everything is seeded and the data order comes from one
seeded generator: the same command on the same CPU gives the same weights. The output folder appears
in one rename at the end, holding config.json (Hugging Face Llama layout), model.safetensors,
tokenizer.json and a model card (README.md with loss_curve.png), measured on the saved weights.

Induction heads are slow to form from 1 MB of text, so training follows a curriculum: half the windows
repeat one span, of random tokens or of text, to fill the window (predicting each repeat is what
induction heads do), and the first steps use short windows, where attention has fewer keys to choose
from and such heads form sooner.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import sys
import tempfile
from pathlib import Path

import torch

from explorer.engine import heads
from explorer.engine.model import Transformer
from explorer.explorer import load
from explorer.loading.folders import save_checkpoint
from explorer.tools.training import model_card
from explorer.tools.training.config import PRESETS, TrainConfig
from explorer.tools.training.data import heldout_sample, split_corpus, train_tokenizer
from explorer.tools.training.measure import measure
from explorer.tools.training.train import model_config, train

HELDOUT_SAMPLE_FILE = "heldout_sample.txt"


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, TrainConfig]:
    parser = argparse.ArgumentParser(prog="python -m explorer.train", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a UTF-8 plain-text file")
    parser.add_argument("--out", type=Path, required=True, help="the model folder to write")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="shakespeare")
    parser.add_argument(
        "--work-dir", type=Path, help="intermediate checkpoints (default: under the temp dir)"
    )
    fields = dataclasses.fields(TrainConfig)
    for field in fields:
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=type(field.default), help=f"overrides the preset's {field.default!r}")
    args = parser.parse_args(argv)
    overrides = {f.name: getattr(args, f.name) for f in fields if getattr(args, f.name) is not None}
    return args, dataclasses.replace(PRESETS[args.preset], **overrides)


def describe_machine(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [
            line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if "model name" in line
        ]
        cpu = names[0] if names else cpu
    return f"{cpu}, {os.cpu_count()} cores; torch threads: {torch.get_num_threads()}"


def publish(folder: Path, out: Path) -> None:
    """Put a finished folder at `out` by renames only, so `out` is never seen half-written. A previous
    `out` moves next to `folder` (a temporary directory) and goes when that is cleaned up."""
    if out.exists():
        out.rename(folder.with_name("previous"))
    folder.rename(out)


def main(argv: list[str] | None = None) -> None:
    args, config = parse_args(argv)
    command = shlex.join(["python", "-m", "explorer.train", *(sys.argv[1:] if argv is None else argv)])
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    train_text, heldout_text = split_corpus(args.corpus.read_text(encoding="utf-8"))
    tokenizer = train_tokenizer(train_text, config.vocab)
    train_tokens = torch.tensor(tokenizer.encode(train_text).ids)
    heldout_tokens = torch.tensor(tokenizer.encode(heldout_text).ids)
    model = Transformer(model_config(config, tokenizer))
    model.init_weights(generator=torch.Generator().manual_seed(config.seed))
    model.to(config.device)
    print(
        f"{sum(p.numel() for p in model.parameters()):,} parameters; {len(train_tokens):,} training tokens",
        file=sys.stderr,
    )

    work_dir = args.work_dir or Path(tempfile.gettempdir()) / "explorer-train" / args.out.name
    heldout_batches = heads.token_windows(heldout_tokens, config.context + 1, count=config.eval_windows)
    history = train(
        model, train_tokens, heldout_batches, config, lambda: save_checkpoint(model, tokenizer, work_dir)
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.out.parent, prefix=f".{args.out.name}-") as staging:
        folder = Path(staging) / args.out.name
        save_checkpoint(model, tokenizer, folder)
        (folder / HELDOUT_SAMPLE_FILE).write_text(heldout_sample(heldout_text), encoding="utf-8")
        saved = load(folder, device=config.device)
        measurements = measure(saved, train_text, heldout_text, config)
        model_card.write(
            folder,
            model_card.CardFacts(
                config=saved.config,
                n_parameters=sum(p.numel() for p in saved.model.parameters()),
                corpus=args.corpus.name,
                corpus_chars=len(train_text) + len(heldout_text),
                train_tokens=len(train_tokens),
                tokens_seen=config.steps * config.tokens_per_step,
                train_config=config,
                machine=describe_machine(config.device),
                command=command,
            ),
            history,
            measurements,
        )
        publish(folder, args.out)
    print(f"wrote {args.out}: held-out loss {measurements.heldout_loss:.3f} nats/token, "
          f"{measurements.heldout_bpc:.3f} bits/char", file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
