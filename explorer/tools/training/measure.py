"""What the model card reports, measured on the saved weights: losses and bits per character on training
and held-out text, the heads' types, the copy loss on random tokens written twice, and sample text."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from explorer.engine import heads
from explorer.engine.model import Transformer
from explorer.explorer import Explorer
from explorer.tools.training.config import TrainConfig
from explorer.tools.training.data import heldout_sample
from explorer.tools.training.train import mean_loss, next_token_losses

SAMPLE_PROMPT = "ROMEO:\n"


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
