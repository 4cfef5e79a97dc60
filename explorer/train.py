"""`python -m explorer.train`: train the bundled model, a small GQA Llama, on a plain-text corpus.

    python -m explorer.train --corpus ../shared/data/tinyshakespeare.txt --out assets/shakespeare-gqa

The last 10% of the corpus is held out. A byte-level BPE tokenizer is trained on the rest, then the
project's own `explorer.model.Transformer`. Everything is seeded and the data order comes from one
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
import math
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from tqdm import tqdm

from explorer import heads, model_card
from explorer.checkpoints import save_checkpoint
from explorer.config import ModelConfig
from explorer.model import Transformer
from explorer.run import Explorer, load
from explorer.train_config import PRESETS, TrainConfig
from explorer.train_data import END_OF_TEXT, heldout_sample, sample_batch, split_corpus, train_tokenizer

HELDOUT_SAMPLE_FILE = "heldout_sample.txt"
SAMPLE_PROMPT = "ROMEO:\n"


# --- model and optimisation -------------------------------------------------------------------------


def model_config(config: TrainConfig, tokenizer: Tokenizer) -> ModelConfig:
    end_of_text = tokenizer.token_to_id(END_OF_TEXT)
    return ModelConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=config.hidden,
        n_layers=config.layers,
        n_heads=config.heads,
        n_kv_heads=config.kv_heads,
        intermediate_size=config.intermediate,
        max_position_embeddings=config.context,
        tie_word_embeddings=True,
        bos_token_id=end_of_text,
        eos_token_id=end_of_text,
    )


def build_optimizer(model: Transformer, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW; matrices (embeddings included) decay, norm gains do not."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    gains = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": matrices, "weight_decay": config.weight_decay},
        {"params": gains, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95), fused=True)


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (0.55 + 0.45 * math.cos(math.pi * progress))


def next_token_losses(model: Transformer, batch: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (nats) of every next token.  # [B, N+1] -> [B, N]"""
    logits = model(batch[:, :-1]).float()  # [B, N, vocab]
    return F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")


@torch.no_grad()
def mean_loss(model: Transformer, batches: torch.Tensor, batch_size: int) -> float:
    """Mean next-token loss (nats) over windows.  # [W, N+1] -> float"""
    device = model.embed_tokens.weight.device
    total = sum(
        next_token_losses(model, chunk.to(device)).sum().item() for chunk in batches.split(batch_size)
    )
    return total / batches[:, 1:].numel()


@dataclass
class History:
    train_loss: list[float] = dataclasses.field(default_factory=list)  # every step, on its own batch
    eval_steps: list[int] = dataclasses.field(default_factory=list)
    heldout_loss: list[float] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def train(
    model: Transformer,
    train_tokens: torch.Tensor,
    heldout_batches: torch.Tensor,
    config: TrainConfig,
    after_eval: Callable[[], None],
) -> History:
    """The training loop, with a progress bar (tokens/s, loss); `after_eval()` runs after each evaluation."""
    generator = torch.Generator().manual_seed(config.seed)
    vocabulary = train_tokens.unique()  # [V] the token ids the training text uses
    optimizer = build_optimizer(model, config)
    history = History()
    bar = tqdm(total=config.steps * config.tokens_per_step, unit="tok", unit_scale=True, mininterval=2)
    start = time.perf_counter()
    for step in range(1, config.steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step - 1, config)
        batch = sample_batch(train_tokens, vocabulary, config, step - 1, generator).to(config.device)
        loss = next_token_losses(model, batch).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        history.train_loss.append(loss.item())
        if step % config.eval_every == 0 or step == config.steps:
            history.eval_steps.append(step)
            history.heldout_loss.append(mean_loss(model, heldout_batches, config.batch_size))
            after_eval()
        bar.update(config.tokens_per_step)
        heldout = f"{history.heldout_loss[-1]:.3f}" if history.heldout_loss else "-"
        bar.set_postfix(loss=f"{loss.item():.3f}", heldout=heldout)
    bar.close()
    history.seconds = time.perf_counter() - start
    return history


# --- measuring the saved model ----------------------------------------------------------------------


@torch.no_grad()
def copy_losses(model: Transformer, repeated: torch.Tensor) -> tuple[float, float]:
    """Mean loss on the first and on the second copy of sequences written twice (the first token of
    the second copy left out: nothing before it says that a copy starts).  # [S, 2P] -> (first, second)"""
    period = repeated.shape[1] // 2
    losses = next_token_losses(model, repeated.to(model.embed_tokens.weight.device))  # [S, 2P-1]
    return losses[:, : period - 1].mean().item(), losses[:, period:].mean().item()


@torch.no_grad()
def continue_text(explorer: Explorer, prompt: str, n_tokens: int, temperature: float = 0.0, seed: int = 0):
    """The prompt and `n_tokens` more: greedy at temperature 0, else sampled (seeded)."""
    generator = torch.Generator().manual_seed(seed)
    ids = explorer.tokenizer.encode(prompt).ids
    for _ in range(n_tokens):
        context = torch.tensor([ids[-explorer.config.context_length :]], device=explorer.device)
        logits = explorer.model(context)[0, -1].float().cpu()  # [vocab]
        if temperature == 0:
            ids.append(int(logits.argmax()))
        else:
            probs = (logits / temperature).softmax(-1)
            ids.append(int(torch.multinomial(probs, 1, generator=generator)))
    return explorer.tokenizer.decode(ids)


def bits_per_character(loss: float, n_tokens: int, n_chars: int) -> float:
    """nats per token -> bits per character of the text those tokens spell."""
    return loss * n_tokens / n_chars / math.log(2)


@dataclass
class Measurements:
    train_loss: float  # nats per token, on plain text windows (no repeated spans)
    heldout_loss: float
    train_bpc: float
    heldout_bpc: float
    head_scores: dict[str, torch.Tensor]  # {name: [L, H]}
    copy_loss_first: float
    copy_loss_second: float
    prompt: str
    greedy: str  # the prompt and its continuations
    sampled: str


def measure(explorer: Explorer, train_text: str, heldout_text: str, config: TrainConfig) -> Measurements:
    """Everything the model card reports, measured on the saved weights."""
    model, tokenizer = explorer.model, explorer.tokenizer
    train_ids, heldout_ids = (torch.tensor(tokenizer.encode(text).ids) for text in (train_text, heldout_text))
    heldout_batches = heads.token_windows(heldout_ids, config.context + 1)
    train_batches = heads.token_windows(train_ids, config.context + 1, count=len(heldout_batches))
    train_loss = mean_loss(model, train_batches, config.batch_size)
    heldout_loss = mean_loss(model, heldout_batches, config.batch_size)
    repeated = heads.repeated_random_tokens(tokenizer, config.context // 2, count=16, seed=config.seed)
    first, second = copy_losses(model, repeated)
    return Measurements(
        train_loss=train_loss,
        heldout_loss=heldout_loss,
        train_bpc=bits_per_character(train_loss, len(train_ids), len(train_text)),
        heldout_bpc=bits_per_character(heldout_loss, len(heldout_ids), len(heldout_text)),
        head_scores=heads.head_type_scores(
            explorer, heldout_sample(heldout_text), length=config.context, seed=config.seed
        ),
        copy_loss_first=first,
        copy_loss_second=second,
        prompt=SAMPLE_PROMPT,
        greedy=continue_text(explorer, SAMPLE_PROMPT, 100),
        sampled=continue_text(explorer, SAMPLE_PROMPT, 100, temperature=0.8, seed=config.seed),
    )


# --- command line -----------------------------------------------------------------------------------


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
    print(f"{model.num_parameters():,} parameters; {len(train_tokens):,} training tokens", file=sys.stderr)

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
                n_parameters=saved.model.num_parameters(),
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
