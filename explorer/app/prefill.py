"""The Intervene tab's prompts from the prompt on screen: the clean prompt is it, and where it names
two people (as an IOI prompt does: "When Mary and John went to the store, John gave a drink to") the
corrupted prompt swaps them, the answer is the name said once and the distractor the one said twice.

A name is a capitalised word that does not start a sentence. Nothing here knows a tokenizer: the
caller keeps answers that are single tokens, and the sweep checks the token counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"\b[A-Z][a-z]+\b")
SENTENCE_START = re.compile(r"(^|[.!?]\s+|\n)\s*$")  # what comes before a word that starts a sentence


@dataclass(frozen=True)
class Swap:
    """Two names of a prompt, and the prompt with each written as the other."""

    said_once: str  # the indirect object, in an IOI prompt: the answer
    said_twice: str  # the subject: the distractor
    corrupted: str


def names(text: str) -> list[str]:
    """Capitalised words that do not start a sentence, each once, in order of first appearance."""
    found = []
    for match in WORD.finditer(text):
        if not SENTENCE_START.search(text[: match.start()]) and match.group() not in found:
            found.append(match.group())
    return found


def swap_names(text: str) -> Swap | None:
    """The prompt's two names swapped everywhere, or None when it names more or fewer than two."""
    found = names(text)
    if len(found) != 2:
        return None
    first, second = found
    swapped = re.sub(rf"\b({first}|{second})\b", lambda m: second if m.group() == first else first, text)
    counts = {name: len(re.findall(rf"\b{name}\b", text)) for name in found}
    once, twice = sorted(found, key=lambda name: counts[name])
    return Swap(said_once=once, said_twice=twice, corrupted=swapped)
