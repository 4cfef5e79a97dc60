"""What `python -m explorer.train` trains: the model's shape, the optimisation, the curriculum for
induction heads, and the presets (`shakespeare`, the bundled model; `tiny`, for tests)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainConfig:
    # model
    layers: int = 4
    hidden: int = 192
    heads: int = 8
    kv_heads: int = 2
    intermediate: int = 512
    context: int = 256
    vocab: int = 4096
    # optimisation
    steps: int = 5000
    batch_size: int = 8  # sequences of `context` tokens; short-context steps take as many tokens
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.1
    # curriculum for induction heads
    short_context: int = 64  # the first `short_steps` train on windows this long
    short_steps: int = 1500
    repeat_fraction: float = 0.5  # share of windows that are one random span repeated to fill them
    repeat_source: str = "mixed"  # "vocabulary": random tokens the text uses; "text"; "mixed": either, evenly
    # bookkeeping
    eval_every: int = 100
    eval_windows: int = 32  # held-out windows scored at each evaluation during training
    seed: int = 0
    device: str = "cpu"
    threads: int = 1  # CPU threads; one is steady on a shared machine and repeatable across core counts

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.context

    def window(self, step: int) -> int:
        """Training window length at `step` (counted from 0)."""
        return self.short_context if step < self.short_steps else self.context


PRESETS = {
    "shakespeare": TrainConfig(),
    "tiny": TrainConfig(
        layers=2, hidden=32, intermediate=64, context=32, vocab=300, steps=6, batch_size=4, warmup=2,
        short_context=16, short_steps=3, eval_every=3, eval_windows=4,
    ),
}  # fmt: skip
