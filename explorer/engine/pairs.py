"""Prompt pairs for circuit work: a dataset of (clean, corrupted) prompts with the answer (and the
distractor) each is read for, tokenized and checked, grouped by length into batches; and the metrics
read at each pair's last position.

- A pair's two prompts must tokenize to the same number of tokens, so that each position patches its
  counterpart; the message names the pair (its number in the dataset) and shows both tokenizations.
- Pairs of different lengths are allowed: each length is one batch; a metric is averaged over pairs.
- Metrics, read from the final normed stream at the last position:
  `logit_diff` logit(answer) − logit(distractor) (the default; it needs distractors),
  `prob` the answer's probability, `kl` KL(clean ‖ this run) of the next-token distributions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.engine.interventions import _tokenization, single_token
from explorer.engine.tokens import encode
from explorer.errors import PromptError

METRICS = ("logit_diff", "prob", "kl")


@dataclass(frozen=True, eq=False)
class Batch:
    """Pairs of one length N (model device)."""

    clean: torch.Tensor  # [B, N] token ids
    corrupted: torch.Tensor  # [B, N]
    answers: torch.Tensor  # [B]
    distractors: torch.Tensor | None  # [B]
    indices: list[int]  # [B] each pair's number in the dataset

    @property
    def size(self) -> int:
        return self.clean.shape[0]

    @property
    def n_tokens(self) -> int:
        return self.clean.shape[1]

    @property
    def first_difference(self) -> int:
        """The first position where any pair's prompts differ (the positions before are the same)."""
        differ = (self.clean != self.corrupted).any(0).nonzero()
        return int(differ[0]) if len(differ) else self.n_tokens


@dataclass(frozen=True, eq=False)
class Dataset:
    batches: list[Batch]
    metric: str

    @property
    def size(self) -> int:
        return sum(batch.size for batch in self.batches)


def _listed(value, count: int | None, name: str) -> list:
    if value is None or isinstance(value, str):
        return [value] * (count or 1)
    value = list(value)
    if count is not None and len(value) != count:
        raise ValueError(f"{len(value)} {name} for {count} pairs: give one per pair, or one for all")
    return value


def listed_pairs(clean, corrupted, answer, distractor=None) -> list[dict]:
    """The pairs as given (a prompt or lists, as `dataset` reads them), one dict each."""
    cleans = _listed(clean, None, "clean prompts")
    columns = zip(
        cleans,
        _listed(corrupted, len(cleans), "corrupted prompts"),
        _listed(answer, len(cleans), "answers"),
        _listed(distractor, len(cleans), "distractors"),
        strict=True,
    )
    return [dict(clean=c, corrupted=x, answer=a, distractor=d) for c, x, a, d in columns]


def dataset(explorer, clean, corrupted, answer, distractor=None, metric: str = "logit_diff") -> Dataset:
    """Encode and check a dataset: `clean` and `corrupted` a prompt each or lists of them (pairs by
    index); `answer` and `distractor` one token for every pair or one per pair."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(map(repr, METRICS))}, got {metric!r}")
    cleans = _listed(clean, None, "clean prompts")
    corrupteds = _listed(corrupted, len(cleans), "corrupted prompts")
    answers = _listed(answer, len(cleans), "answers")
    distractors = _listed(distractor, len(cleans), "distractors")
    if not cleans:
        raise ValueError("the dataset holds no pairs")
    if metric == "logit_diff" and any(d is None for d in distractors):
        raise ValueError("the logit difference needs a distractor for every pair (or use 'prob' or 'kl')")
    tokenizer, limit = explorer.tokenizer, explorer.config.context_length
    groups: dict[int, list] = {}
    for index, (c, x, a, d) in enumerate(zip(cleans, corrupteds, answers, distractors, strict=True)):
        pair = f"pair {index + 1}" if len(cleans) > 1 else "the pair"
        encoded = [encode(tokenizer, text, limit) for text in (c, x)]
        if any(e.n_dropped or e.n_chars_dropped for e in encoded):
            raise PromptError(f"In {pair}, a prompt is longer than the model's {limit:,}-token context.")
        ids = [e.ids for e in encoded]
        if len(ids[0]) != len(ids[1]):
            first = next((i for i, (p, q) in enumerate(zip(*ids, strict=False)) if p != q), 0)
            raise PromptError(
                f"In {pair}, the clean and corrupted prompts must have the same number of tokens, so "
                f"that each position patches its counterpart. Clean, {len(ids[0])} tokens: "
                f"{_tokenization(encoded[0].tokens, first)}. Corrupted, {len(ids[1])} tokens: "
                f"{_tokenization(encoded[1].tokens, first)}."
            )
        answer_id = single_token(tokenizer, a, f"answer of {pair}")
        distractor_id = None if d is None else single_token(tokenizer, d, f"distractor of {pair}")
        groups.setdefault(len(ids[0]), []).append((index, ids[0], ids[1], answer_id, distractor_id))
    device = explorer.model.embed_tokens.weight.device
    batches = []
    for rows in groups.values():
        index, c_ids, x_ids, a_ids, d_ids = zip(*rows, strict=True)
        batches.append(
            Batch(
                clean=torch.tensor(c_ids, device=device),
                corrupted=torch.tensor(x_ids, device=device),
                answers=torch.tensor(a_ids, device=device),
                distractors=None if d_ids[0] is None else torch.tensor(d_ids, device=device),
                indices=list(index),
            )
        )
    return Dataset(batches, metric)


def require_one_length(data: Dataset) -> None:
    """Positional readings pair position p of every prompt with p of the others: the pairs must all
    have one length; the message names the first pair of another length than the first pair's."""
    if len(data.batches) < 2:
        return
    first = min(data.batches, key=lambda batch: min(batch.indices))
    n, index = first.n_tokens, min(first.indices)
    other = min((b for b in data.batches if b is not first), key=lambda batch: min(batch.indices))
    raise PromptError(
        f"A positional reading needs pairs of one length, so that each position means the same token "
        f"in every pair: pair {min(other.indices) + 1} has {other.n_tokens} tokens where pair {index + 1} "
        f"has {n}."
    )


def log_probs(model, normed: torch.Tensor) -> torch.Tensor:
    """Next-token log-probabilities from the final normed stream.  # [R, hidden] -> [R, vocab] float32"""
    return torch.log_softmax(model.logits(normed).float(), dim=-1)


def metric_of(
    model,
    normed: torch.Tensor,
    batch: Batch,
    metric: str,
    clean_log_probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Each row's metric from the final normed stream at its last position; row r is pair r % B of the
    batch (rows of several patches follow one another, B each).  # [R, hidden] -> [R] float32"""
    rows = normed.shape[0]
    pairs = torch.arange(rows, device=normed.device) % batch.size  # [R]
    if metric == "logit_diff":
        chosen = torch.stack([batch.answers[pairs], batch.distractors[pairs]], -1)  # [R, 2]
        weights = model.lm_head.weight[chosen]  # [R, 2, hidden]
        logits = torch.einsum("rk,rck->rc", normed, weights)
        cap = model.config.final_logit_softcapping
        logits = (logits if cap is None else torch.tanh(logits / cap) * cap).float()
        return logits[:, 0] - logits[:, 1]
    logp = log_probs(model, normed)  # [R, vocab]
    if metric == "prob":
        return logp.gather(1, batch.answers[pairs][:, None])[:, 0].exp()
    reference = clean_log_probs[pairs]  # [R, vocab]
    return (reference.exp() * (reference - logp)).sum(-1)
