"""Built-in datasets of prompt pairs for circuit work, each with its corruption, drawn from a seed:

- `ioi`: indirect object identification (Wang et al. 2022): “When Mary and John went to the store, John
  gave a drink to” -> “ Mary” over “ John”. Corrupted: the second mention of the subject is a third
  name (the “ABC” corruption), so the prompt no longer says who is the indirect object.
- `factual`: “The capital of France is” -> “ Paris” over the corrupted country's capital; corrupted: another
  country of as many tokens.
- `induction`: random words, then the same words again up to the last -> the last word; corrupted: the
  first half is other random words, so there is nothing to copy (distractor: the word that stood there).

Given a tokenizer, the names, places, objects, capitals and words are only those that are one token
(with their leading space), so that every pair's two prompts tokenize to the same length.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NAMES = [
    "Mary",
    "John",
    "Tom",
    "James",
    "Dan",
    "Sarah",
    "Alice",
    "Bob",
    "Paul",
    "Kate",
    "Anna",
    "Mark",
    "Lisa",
    "David",
    "Emma",
    "Jack",
    "Mike",
    "Sam",
    "Max",
    "Ben",
    "Laura",
    "Rachel",
    "Peter",
    "George",
    "Steve",
    "Nick",
    "Chris",
    "Amy",
    "Jane",
    "Luke",
    "Adam",
    "Eric",
    "Tim",
    "Joe",
    "Matt",
    "Ryan",
    "Kevin",
    "Alex",
]
PLACES = [
    "store",
    "park",
    "school",
    "office",
    "hospital",
    "restaurant",
    "station",
    "beach",
    "library",
    "garden",
    "market",
    "house",
]
# each object with its indefinite article, "an" before a vowel sound
OBJECTS = {
    "drink": "a",
    "book": "a",
    "ring": "a",
    "ball": "a",
    "gift": "a",
    "letter": "a",
    "key": "a",
    "apple": "an",
    "bag": "a",
    "phone": "a",
    "hat": "a",
    "cake": "a",
}
IOI_TEMPLATES = (
    "When{A} and{B} went to the{P},{C} gave{O} to",
    "After{A} and{B} arrived at the{P},{C} handed{O} to",
    "Then,{A} and{B} had a long day at the{P}.{C} gave{O} to",
    "While{A} and{B} were working at the{P},{C} passed{O} to",
)
CAPITALS = {
    "France": "Paris",
    "Germany": "Berlin",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Japan": "Tokyo",
    "Russia": "Moscow",
    "England": "London",
    "Egypt": "Cairo",
    "Greece": "Athens",
    "Austria": "Vienna",
    "China": "Beijing",
    "Canada": "Ottawa",
    "Poland": "Warsaw",
    "Ireland": "Dublin",
    "Portugal": "Lisbon",
    "Norway": "Oslo",
}


@dataclass(frozen=True)
class PromptSet:
    """Pairs by index, as `ex.patch_nodes`, `ex.edge_attribution` and `ex.circuit_metric` take them."""

    name: str
    clean: list[str]
    corrupted: list[str]
    answers: list[str]
    distractors: list[str]

    def __len__(self) -> int:
        return len(self.clean)

    def args(self) -> tuple[list[str], list[str], list[str], list[str]]:
        return self.clean, self.corrupted, self.answers, self.distractors


def _one_token(tokenizer, words) -> list[str]:
    """The words that are one token with their leading space (all of them without a tokenizer)."""
    if tokenizer is None:
        return list(words)
    return [w for w in words if len(tokenizer.encode(" " + w, add_special_tokens=False).ids) == 1]


def _need(found: list, count: int, what: str) -> list:
    if len(found) < count:
        raise ValueError(f"this tokenizer has only {len(found)} {what} of one token; {count} are needed")
    return found


def ioi(n: int = 8, seed: int = 0, tokenizer=None, template: int | None = None) -> PromptSet:
    """`n` IOI pairs from `seed` (module doc), the templates taken in turn, or only `template` (its
    pairs are then of one length, as a positional graph needs, given the tokenizer)."""
    rng = random.Random(seed)
    names = _need(_one_token(tokenizer, NAMES), 3, "names")
    places = _need(_one_token(tokenizer, PLACES), 1, "places")
    objects = _need(_one_token(tokenizer, OBJECTS), 1, "objects")
    clean, corrupted, answers, distractors = [], [], [], []
    for i in range(n):
        a, b, c = rng.sample(names, 3)
        text = IOI_TEMPLATES[i % len(IOI_TEMPLATES) if template is None else template]
        place, thing = rng.choice(places), rng.choice(objects)
        fill = dict(A=" " + a, B=" " + b, P=" " + place, O=f" {OBJECTS[thing]} {thing}")
        clean.append(text.format(C=" " + b, **fill))
        corrupted.append(text.format(C=" " + c, **fill))
        answers.append(" " + a)
        distractors.append(" " + b)
    return PromptSet("ioi", clean, corrupted, answers, distractors)


def factual(n: int = 8, seed: int = 0, tokenizer=None) -> PromptSet:
    """`n` factual-recall pairs from `seed` (module doc)."""
    rng = random.Random(seed)
    capitals = set(_one_token(tokenizer, CAPITALS.values()))
    countries = [country for country, capital in CAPITALS.items() if capital in capitals]

    def length(country: str) -> int:
        return 1 if tokenizer is None else len(tokenizer.encode(" " + country, add_special_tokens=False).ids)

    pairs = [(x, y) for x in countries for y in countries if x != y and length(x) == length(y)]
    _need(pairs, 1, "country pairs of equal length with capitals")
    chosen = [rng.choice(pairs) for _ in range(n)]
    return PromptSet(
        "factual",
        [f"The capital of {x} is" for x, _ in chosen],
        [f"The capital of {y} is" for _, y in chosen],
        [" " + CAPITALS[x] for x, _ in chosen],
        [" " + CAPITALS[y] for _, y in chosen],
    )


def induction(n: int = 8, seed: int = 0, tokenizer=None, length: int = 6) -> PromptSet:
    """`n` induction pairs of `length` random words repeated, from `seed` (module doc)."""
    rng = random.Random(seed)
    words = _need(_one_token(tokenizer, [*NAMES, *PLACES, *OBJECTS]), 2 * length, "words")
    clean, corrupted, answers, distractors = [], [], [], []
    for _ in range(n):
        drawn = rng.sample(words, 2 * length)
        first, other = drawn[:length], drawn[length:]
        repeat = "".join(" " + w for w in first[:-1])
        clean.append("".join(" " + w for w in first) + repeat)
        corrupted.append("".join(" " + w for w in other) + repeat)
        answers.append(" " + first[-1])
        distractors.append(" " + other[-1])
    return PromptSet("induction", clean, corrupted, answers, distractors)


BUILT_IN = {"ioi": ioi, "factual": factual, "induction": induction}


def built_in(name: str, n: int = 8, seed: int = 0, tokenizer=None) -> PromptSet:
    if name not in BUILT_IN:
        raise ValueError(f"built-in datasets: {', '.join(BUILT_IN)}; got {name!r}")
    return BUILT_IN[name](n, seed, tokenizer)
