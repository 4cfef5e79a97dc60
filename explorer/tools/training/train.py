"""The training loop of the bundled model: its config from the training preset, AdamW with warm-up and
cosine decay, the next-token loss, and the loss history the model card plots (`explorer.tools.training`
says how the model is trained)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from tqdm import tqdm

from explorer.engine.config import ModelConfig
from explorer.engine.model import Transformer
from explorer.tools.training.config import TrainConfig
from explorer.tools.training.data import END_OF_TEXT, sample_batch


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
