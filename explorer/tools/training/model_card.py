"""The model card of a model trained by `python -m explorer.train`: README.md and loss_curve.png, from numbers
measured on the saved weights. Pure rendering: nothing here trains or runs a model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from explorer.engine.config import ModelConfig
from explorer.tools.training.config import TrainConfig
from explorer.tools.training.measure import Measurements
from explorer.tools.training.train import History

KNOWN_CORPORA = {
    "tinyshakespeare.txt": (
        "Tiny Shakespeare: about 40,000 lines from Shakespeare's plays, gathered by Andrej Karpathy "
        "for char-rnn. Shakespeare's text is in the public domain."
    ),
}
SPAN_SOURCES = {
    "vocabulary": "of tokens drawn uniformly at random from those the training text uses",
    "text": "of the training text",
    "mixed": "of the training text or, as often, of tokens drawn uniformly at random from those it uses",
}
HEAD_TYPE_TITLES = {"previous_token": "previous-token", "induction": "induction", "sink": "sink"}


@dataclass(frozen=True)
class CardFacts:
    config: ModelConfig
    n_parameters: int
    corpus: str  # file name
    corpus_chars: int
    train_tokens: int  # the training split, in tokens
    tokens_seen: int
    train_config: TrainConfig
    machine: str
    command: str


def write(folder: Path, facts: CardFacts, history: History, measurements: Measurements) -> None:
    plot_losses(history, facts.train_config, folder / "loss_curve.png")
    (folder / "README.md").write_text(render(folder.name, facts, history, measurements), encoding="utf-8")


def plot_losses(history: History, config: TrainConfig, path: Path) -> None:
    from matplotlib.figure import Figure

    window = max(1, min(50, len(history.train_loss) // 10))
    losses = torch.tensor(history.train_loss)
    smoothed = losses.cumsum(0)
    smoothed[window:] = smoothed[window:] - smoothed[:-window].clone()
    smoothed /= torch.arange(1, len(losses) + 1).clamp_max(window)  # trailing mean of `window` steps
    millions = config.tokens_per_step / 1e6
    figure = Figure(figsize=(7, 4), dpi=110)
    axes = figure.subplots()
    axes.plot([millions * (i + 1) for i in range(len(losses))], smoothed, label=f"train ({window}-step mean)")
    eval_tokens = [millions * step for step in history.eval_steps]
    axes.plot(eval_tokens, history.heldout_loss, "o-", markersize=3, label="held-out")
    if 0 < config.short_steps < len(losses):
        axes.axvline(
            millions * config.short_steps, color="gray", linestyle=":", label="full context from here"
        )
    axes.set(xlabel="tokens seen (millions)", ylabel="loss (nats per token)")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)


def top_heads(scores: torch.Tensor, k: int = 3) -> list[tuple[int, int, float]]:
    """The k highest-scoring heads as (layer, head, score).  # [L, H] -> k triples"""
    values, flat = scores.flatten().topk(min(k, scores.numel()))
    n_heads = scores.shape[1]
    return [(i // n_heads, i % n_heads, v) for i, v in zip(flat.tolist(), values.tolist(), strict=True)]


def head_table(scores: dict[str, torch.Tensor]) -> str:
    """One row per head, one column per head type; each type's top three in bold."""
    names = list(scores)
    tops = {name: {(layer, head) for layer, head, _ in top_heads(scores[name])} for name in names}
    rows = ["| layer.head | " + " | ".join(HEAD_TYPE_TITLES[n] for n in names) + " |"]
    rows.append("|---|" + "---:|" * len(names))
    n_layers, n_heads = scores[names[0]].shape
    for layer in range(n_layers):
        for head in range(n_heads):
            cells = []
            for name in names:
                cell = f"{scores[name][layer, head].item():.2f}"
                cells.append(f"**{cell}**" if (layer, head) in tops[name] else cell)
            rows.append(f"| {layer}.{head} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def top_heads_lines(scores: dict[str, torch.Tensor]) -> str:
    return "\n".join(
        f"- {HEAD_TYPE_TITLES[name]}: "
        + ", ".join(f"{layer}.{head} ({score:.2f})" for layer, head, score in top_heads(values))
        for name, values in scores.items()
    )


def heads_summary(scores: dict[str, torch.Tensor], clear: float = 0.4) -> str:
    """One sentence on which head types the model has: those with a head scoring at least `clear`."""
    found, missing = [], []
    for name, values in scores.items():
        (found if values.max() >= clear else missing).append(f"{HEAD_TYPE_TITLES[name]} heads")
    said = f"Its heads do recognisable things: {' and '.join(found)} (table below)." if found else ""
    lacks = f"It has no clear {' or '.join(missing)} (no head scores {clear} or more)." if missing else ""
    return " ".join(part for part in (said, lacks) if part)


def render(name: str, facts: CardFacts, history: History, m: Measurements) -> str:
    c, t = facts.config, facts.train_config
    corpus_note = KNOWN_CORPORA.get(facts.corpus, "See the corpus's own source for its licence.")
    minutes = history.seconds / 60
    summary = heads_summary(m.head_scores)
    text_passes = facts.tokens_seen * (1 - t.repeat_fraction) / facts.train_tokens
    return f"""---
license: mit
language: en
library_name: transformers
pipeline_tag: text-generation
tags: [llama, gqa, interpretability, attention-explorer]
---

# {name}

A {facts.n_parameters / 1e6:.3g}M-parameter Llama-architecture model trained from scratch by
`explorer.train`, bundled with Attention Explorer so the app runs offline on a CPU. {summary}
It loads in Hugging Face `transformers` (`AutoModelForCausalLM.from_pretrained`) as well as in
`explorer.load()`.

## Architecture

| | |
|---|---|
| layers | {c.n_layers} |
| hidden size | {c.hidden_size} |
| query / key-value heads | {c.n_heads} / {c.n_kv_heads} (GQA: {c.group_size} query heads share each) |
| head size | {c.head_dim} |
| MLP | SwiGLU, {c.intermediate_size} wide |
| positions | RoPE (rotate-half, θ = {c.rope_theta:g}), context {c.max_position_embeddings} tokens |
| norm | RMSNorm before attention and MLP, ε = {c.rms_norm_eps:g} |
| vocabulary | {c.vocab_size} byte-level BPE tokens (any Unicode text encodes, no unknown token) |
| embeddings | {"tied to the output layer" if c.tie_word_embeddings else "separate from the output layer"} |
| parameters | {facts.n_parameters:,} (float32) |

## Data

`{facts.corpus}`, {facts.corpus_chars:,} characters. {corpus_note} The first 90% trains the tokenizer
and the model ({facts.train_tokens:,} tokens); the last 10% is held out and used only for measuring.

Induction heads are slow to form from 1 MB of text, so training follows a curriculum that makes them
form within a CPU budget. In {t.repeat_fraction:.0%} of the training windows one random span
{SPAN_SOURCES[t.repeat_source]} (4 tokens to half the window, mostly short) is repeated to fill the
window: after its first copy, every token can be predicted by looking back at the previous occurrence of
the token before it, which is what an induction head does. The first {t.short_steps:,} steps train on
windows of {t.short_context} tokens (the same tokens per step, more windows), where such heads form
sooner; the rest on the full {t.context}-token context. Scores below are measured on held-out text and
on fresh random sequences, never the ones trained on.

## Training

{t.steps:,} steps of {t.tokens_per_step:,} tokens: {facts.tokens_seen:,} tokens seen
(its plain-text windows make about {text_passes:.1f} passes over the training split). AdamW (β = 0.9, 0.95,
weight decay {t.weight_decay:g}), peak learning rate {t.lr:g} after {t.warmup} warm-up steps, cosine
decay to a tenth, gradients clipped at 1. Seed {t.seed}; on the same CPU the command below reproduces the
weights. Training took {minutes:.1f} minutes on {t.device} ({facts.machine}).

![loss curve](loss_curve.png)

The train curve mixes plain text with repeated spans: its steep fall is the repeats becoming
predictable as induction heads form. The held-out loss is always measured on {t.eval_windows} full
{t.context}-token windows of plain held-out text; while training sees only {t.short_context}-token windows,
the positions beyond those are untrained.

| | train | held-out |
|---|---:|---:|
| loss (nats per token) | {m.train_loss:.3f} | {m.heldout_loss:.3f} |
| bits per character | {m.train_bpc:.3f} | {m.heldout_bpc:.3f} |

Losses are means over non-overlapping {t.context}-token windows of plain text (no repeated spans).
Bits per character = nats per token × tokens per character of that split ÷ ln 2, comparable with
character-level models.

In-context copying: on random tokens written twice ({t.context // 2} + {t.context // 2}), the loss is
{m.copy_loss_first:.2f} nats per token on the first copy and {m.copy_loss_second:.2f} on the second.

## What the heads do

Scores per head, from `explorer.heads.head_type_scores`:
- previous-token: mean attention from position i to i − 1, on held-out text (`heldout_sample.txt`,
  the first 8 kB of the held-out split, shipped here so the scores can be remeasured offline);
- induction: on random tokens written twice, mean attention from each token of the second copy to the
  token right after its earlier occurrence (random tokens: nothing there can be known by heart);
- sink: mean attention to position 0, on held-out text.

Top three of each:
{top_heads_lines(m.head_scores)}

{head_table(m.head_scores)}

## Samples

Greedy continuation of `{m.prompt!r}`:

```text
{m.greedy}
```

Sampled at temperature 0.8 (seed {t.seed}):

```text
{m.sampled}
```

## Reproduce

```bash
{facts.command}
```
"""
