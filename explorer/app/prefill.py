"""The Intervene tab's prompts from the prompt on screen: the clean prompt is it, and where it names
two people (as an IOI prompt does: "When Mary and John went to the store, John gave a drink to") the
corrupted prompt swaps them, the answer is the name said once and the distractor the one said twice.

A name is a capitalised word that does not start a sentence. Nothing here knows a tokenizer: the
caller keeps answers that are single tokens, and the sweep checks the token counts. Each function
reads the text once, so a handler outside the queue may call it on any prompt the app takes.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

WORD = re.compile(r"\b[A-Z][a-z]+\b")
SENTENCE_ENDS = ".!?"


@dataclass(frozen=True)
class Swap:
    """Two names of a prompt, and the prompt with each written as the other."""

    said_once: str  # the indirect object, in an IOI prompt: the answer
    said_twice: str  # the subject: the distractor
    corrupted: str


def capitalised_words(text: str):
    """Each capitalised word of `text` with whether it is a name: whether it does not start a sentence
    (the text before it, less trailing whitespace, is empty or ends a sentence with a space after it,
    or that whitespace holds a line break). One pass: each word looks back only as far as the word
    before it."""
    previous_end = 0
    for match in WORD.finditer(text):
        gap = text[previous_end : match.start()]
        before = gap.rstrip()
        space = gap[len(before) :]
        at_text_start = previous_end == 0 and not before
        ends_sentence = bool(before) and before[-1] in SENTENCE_ENDS and bool(space)
        yield match.group(), not (at_text_start or ends_sentence or "\n" in space)
        previous_end = match.end()


def names(text: str) -> list[str]:
    """Capitalised words that do not start a sentence, each once, in order of first appearance."""
    return list(dict.fromkeys(word for word, is_name in capitalised_words(text) if is_name))


def swap_names(text: str) -> Swap | None:
    """The prompt's two names swapped everywhere, or None when it names more or fewer than two."""
    found = names(text)
    if len(found) != 2:
        return None
    first, second = found
    swapped = re.sub(rf"\b({first}|{second})\b", lambda m: second if m.group() == first else first, text)
    counts = Counter(re.findall(rf"\b(?:{first}|{second})\b", text))
    once, twice = sorted(found, key=lambda name: counts[name])
    return Swap(said_once=once, said_twice=twice, corrupted=swapped)
