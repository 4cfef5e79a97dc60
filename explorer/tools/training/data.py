"""The training data of `explorer.train`: the corpus split into train and held-out text, a byte-level
BPE tokenizer trained on the train split, and batches of windows, a share of them one span repeated
to fill the window (the curriculum that makes induction heads form from 1 MB of text)."""

from __future__ import annotations

import math

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from explorer.tools.training.config import TrainConfig

END_OF_TEXT = "<|endoftext|>"
HELDOUT_FRACTION = 0.1
HELDOUT_SAMPLE_CHARS = 8000


def split_corpus(text: str) -> tuple[str, str]:
    """(train, held-out): the held-out split is the last 10% of the text."""
    cut = int(len(text) * (1 - HELDOUT_FRACTION))
    return text[:cut], text[cut:]


def heldout_sample(heldout_text: str) -> str:
    """The start of the held-out split in whole lines, about 8 kB: shipped beside the model so that
    head types can be measured on held-out text offline."""
    cut = heldout_text.rfind("\n", 0, HELDOUT_SAMPLE_CHARS) + 1
    return heldout_text[: cut or HELDOUT_SAMPLE_CHARS]


def train_tokenizer(text: str, vocab_size: int) -> Tokenizer:
    """Byte-level BPE: every byte is in the alphabet, so any Unicode text encodes without unknowns."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[END_OF_TEXT],
        show_progress=False,
    )
    tokenizer.train_from_iterator(text.splitlines(keepends=True), trainer)
    return tokenizer


def sample_batch(
    tokens: torch.Tensor, vocabulary: torch.Tensor, config: TrainConfig, step: int, generator: torch.Generator
) -> torch.Tensor:
    """Random windows of the token stream, `config.window(step)` long. In a `repeat_fraction` of them
    one random span (4 tokens to half the window, log-uniform: short ones are common) is repeated to
    fill the window, so all but its first copy can be predicted by looking back. The span is tokens
    drawn uniformly from `vocabulary` (the ids the text uses), running text, or ("mixed") either, as
    often one as the other: random tokens make induction heads form fast, text makes them fire on text.
    # [T], [V] -> [B, window+1]"""
    length = config.window(step) + 1
    n_windows = config.tokens_per_step // (length - 1)
    starts = torch.randint(len(tokens) - length + 1, (n_windows,), generator=generator)
    batch = torch.stack([tokens[start : start + length] for start in starts.tolist()])
    repeated = torch.rand(n_windows, generator=generator) < config.repeat_fraction
    for row in repeated.nonzero().flatten().tolist():
        log_span = torch.empty(1).uniform_(math.log(4), math.log(length // 2), generator=generator)
        span = int(log_span.exp().round())
        source = config.repeat_source
        if source == "mixed":
            source = "vocabulary" if torch.rand(1, generator=generator) < 0.5 else "text"
        if source == "vocabulary":
            batch[row, :span] = vocabulary[torch.randint(len(vocabulary), (span,), generator=generator)]
        batch[row] = batch[row, :span].repeat(length // span + 1)[:length]
    return batch
