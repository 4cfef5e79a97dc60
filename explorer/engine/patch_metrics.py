"""What a patching sweep reads off each patched run, at the last position: the logit difference
logit(answer) − logit(distractor), the answer's probability, and the KL divergence of the patched
run's next-token distribution from the clean run's, KL(clean ‖ patched) in nats. Each is read from
the final normed state the sweep ends with, through the model's LM head, a block of patches at a
time (so L · H full rows of logits are never held at once).

Recovered, for any of them: (patched − corrupted) / (clean − corrupted); 1 is all of the clean run's
value back, 0 none of it. For KL, clean's own is 0: recovered = 1 − KL(patched) / KL(corrupted).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

METRICS = ("logit_diff", "prob", "kl")
METRIC_NAMES = {
    "logit_diff": "logit difference",
    "prob": "probability of the answer",
    "kl": "KL(clean ‖ patched)",
}
ROWS_PER_BLOCK = 64  # patched states sent through the LM head at once


@dataclass(frozen=True)
class Reading:
    """One metric of a sweep: its value for each patched run, and for the clean and corrupted runs."""

    patched: torch.Tensor  # [L, H] float32 CPU
    clean: float
    corrupted: float

    @property
    def recovered(self) -> torch.Tensor:
        """(patched − corrupted) / (clean − corrupted).  # [L, H]"""
        return (self.patched - self.corrupted) / (self.clean - self.corrupted)


def read_states(
    model,
    states: torch.Tensor,  # [L, H, hidden] final normed state at the last position, one head patched
    clean: torch.Tensor,  # [hidden] the clean run's
    corrupted: torch.Tensor,  # [hidden] the corrupted run's
    answer_id: int,
    distractor_id: int,
    metrics: tuple[str, ...] = METRICS,
) -> dict[str, Reading]:
    """The logit difference (through `Transformer.logits` with the LM head's rows of the two tokens
    alone, soft-capped where the model caps them) and each other reading of `metrics` (the answer's
    probability and KL need every row of the LM head: on SmolLM2's 49,152 tokens, some 0.3 s for its
    270 heads)."""
    pair, dtype = [answer_id, distractor_id], model.lm_head.weight.dtype
    n_layers, n_heads, hidden = states.shape

    def difference(x: torch.Tensor) -> torch.Tensor:  # [..., hidden] -> [...]
        logits = model.logits(x.to(dtype), pair).float()  # [..., 2]
        return logits[..., 0] - logits[..., 1]

    readings = {"logit_diff": (difference(states), difference(clean), difference(corrupted))}
    if {"prob", "kl"} & set(metrics):
        readings |= _distribution_readings(model, states.reshape(-1, hidden), clean, corrupted, answer_id)
    return {
        name: Reading(patched.reshape(n_layers, n_heads).cpu(), float(at_clean), float(at_corrupted))
        for name, (patched, at_clean, at_corrupted) in readings.items()
        if name in metrics or name == "logit_diff"
    }


def _distribution_readings(
    model, rows: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor, answer: int
):
    """p(answer) and KL(clean ‖ run) of each patched run (and of the clean and corrupted runs), through
    the whole LM head a block of rows at a time.  # rows [R, hidden] -> each (patched, clean, corrupted)"""
    dtype = model.lm_head.weight.dtype

    def logits(states: torch.Tensor) -> torch.Tensor:  # [R, hidden] -> [R, vocab] float32
        return model.logits(states.to(dtype)).float()

    ends = torch.log_softmax(logits(torch.stack([clean, corrupted])), dim=-1)  # [2, vocab]
    clean_log, clean_probs = ends[0], ends[0].exp()
    clean_entropy = -(clean_probs * clean_log).sum()
    prob, kl = [], []
    for block in rows.split(ROWS_PER_BLOCK):
        patched = logits(block)  # [B, vocab]
        total = torch.logsumexp(patched, dim=-1)  # [B]
        prob.append((patched[:, answer] - total).exp())
        # KL(clean ‖ patched) = Σ p log p − Σ p (logits − logsumexp), p the clean run's probabilities
        kl.append(total - patched @ clean_probs - clean_entropy)
    corrupted_kl = (clean_probs * (clean_log - ends[1])).sum()
    return {
        "prob": (torch.cat(prob), ends[0, answer].exp(), ends[1, answer].exp()),
        "kl": (torch.cat(kl), torch.zeros(()), corrupted_kl),
    }
