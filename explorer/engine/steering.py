"""Steering read beside its prompting baseline: how often the model speaks of a concept, and what it costs
its language, for a continuation steered by an edit and for the same prompt behind an instruction.

- The concept's probability: over the continuation's steps, the mean of the probability the model gives
  the concept's words at the next position (each word's first token, with and without a leading space).
- The held-out perplexity: exp of the mean negative log-likelihood of a text that is not about the
  concept, read under the same condition (with the edits; or after the instruction): what the edit does
  to the model's language elsewhere.

AxBench (Wu et al. 2025) found prompting beats most steering; a reading that shows steering alone hides
that, so `compare` always reads the prompt with the instruction beside the edits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from explorer.engine.edits import Edit


@dataclass(frozen=True)
class Reading:
    """One condition's continuation of the prompt and its two measures."""

    label: str  # "plain", "steered ×4", "prompted"
    continuation: str
    concept_probability: float  # mean over the continuation's steps of p(a concept word next)
    held_out_perplexity: float


def concept_ids(tokenizer, words: Sequence[str]) -> list[int]:
    """The first token of each word, as written and after a space, each once."""
    if isinstance(words, str) or not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise ValueError("the concept's words are a list of at least one word, none empty")
    ids = []
    for word in words:
        for spelled in (word.strip(), " " + word.strip()):
            first = tokenizer.encode(spelled, add_special_tokens=False).ids[:1]
            if first and first[0] not in ids:
                ids.extend(first)
    return ids


def read(
    explorer,
    label: str,
    prompt: str,
    concept: list[int],
    held_out: str,
    edits: Sequence[Edit] = (),
    instruction: str = "",
    max_new_tokens: int = 24,
    max_tokens: int | None = None,
) -> Reading:
    """The prompt (behind `instruction` where given) continued greedily under `edits`, and its measures;
    the prompt and new tokens within `max_tokens` (default: the model's context)."""
    prefix = f"{instruction.strip()}\n" if instruction.strip() else ""
    edited = list(edits) or None
    generation = explorer.generate(
        prefix + prompt, max_new_tokens=max_new_tokens, edits=edited, max_tokens=max_tokens
    )
    steps = list(generation)
    first = len(generation.prompt_ids) - 1  # the position whose logits chose the first new token
    chose = list(range(first, first + len(steps)))  # the positions whose logits chose each new token
    probs = generation.run.logits_at(chose).softmax(-1)  # [steps, vocab], from the generation's own stream
    concept_probability = float(probs[:, concept].sum(-1).mean())
    return Reading(
        label,
        "".join(step.token for step in steps),
        concept_probability,
        perplexity(explorer, held_out, edits, prefix, max_tokens),
    )


def perplexity(
    explorer, text: str, edits: Sequence[Edit] = (), prefix: str = "", max_tokens: int | None = None
) -> float:
    """exp(mean −log p) of `text`'s tokens after `prefix` (its first token's too, where there is a
    prefix), under `edits`; the prefix and text cut to `max_tokens`."""
    tokenizer = explorer.tokenizer
    before = tokenizer.encode(prefix).ids if prefix else []
    ids = before + tokenizer.encode(text, add_special_tokens=False).ids
    run = explorer.run(ids=ids, edits=list(edits) or None, max_tokens=max_tokens)
    ids = run.ids
    start = max(len(before), 1)  # the first token read is one some position predicts
    logits = run.logits_at(list(range(start - 1, run.n_tokens - 1)))  # [T, vocab]
    targets = torch.tensor(ids[start:])
    nll = torch.nn.functional.cross_entropy(logits, targets)
    return math.exp(float(nll))


def compare(
    explorer,
    prompt: str,
    words: Sequence[str],
    held_out: str,
    vector: torch.Tensor,
    layer: int,
    strengths: Sequence[float],
    instruction: str,
    max_new_tokens: int = 24,
    max_tokens: int | None = None,
) -> list[Reading]:
    """The plain continuation, one steered by `strength × vector` added to the stream entering `layer`
    at every position for each strength, and the prompt behind `instruction`: a Reading each."""
    concept = concept_ids(explorer.tokenizer, words)
    readings = []
    for strength in strengths:
        edits = [Edit("resid", layer, op="add", value=float(strength) * vector)] if strength else []
        label = f"steered ×{strength:g}" if strength else "plain"
        readings.append(
            read(explorer, label, prompt, concept, held_out, edits, "", max_new_tokens, max_tokens)
        )
    prompted = read(
        explorer, "prompted", prompt, concept, held_out, (), instruction, max_new_tokens, max_tokens
    )
    readings.append(prompted)
    return readings
