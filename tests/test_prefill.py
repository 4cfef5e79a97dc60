"""The Intervene tab's prompts from the prompt on screen: two names found and swapped (an IOI prompt),
the answer the name said once and the distractor the one said twice; words that start a sentence are
not names, and a prompt that names fewer or more than two people gets no swap. The names are found as
the definition finds them, in one pass over the prompt."""

from __future__ import annotations

import random
import re

import pytest

from explorer.app.prefill import names, swap_names

IOI = "When Mary and John went to the store, John gave a drink to"


def test_an_ioi_prompts_names_are_swapped_and_the_one_said_once_is_the_answer():
    swap = swap_names(IOI)
    assert swap.corrupted == "When John and Mary went to the store, Mary gave a drink to"
    assert (swap.said_once, swap.said_twice) == ("Mary", "John")


def test_a_word_starting_a_sentence_is_not_a_name():
    assert names("When Mary left. Then John came! Who? Anne") == ["Mary", "John"]
    assert names("The capital of France is") == ["France"]


@pytest.mark.parametrize(
    "prompt", ["The capital of France is", "Now is the winter", "Then Ann, Bob and Cy met"]
)
def test_a_prompt_without_exactly_two_names_gets_no_swap(prompt):
    assert swap_names(prompt) is None


def test_a_name_inside_another_word_is_left_alone():
    swap = swap_names("Then Al met Alice, and Al smiled at Alice's Alba")
    assert swap is None  # three names: Al, Alice, Alba
    swap = swap_names("So Al met Alice, and Al smiled at Alice")
    assert swap.corrupted == "So Alice met Al, and Alice smiled at Al"


def names_by_definition(text: str) -> list[str]:
    """The definition read literally, each word's whole prefix searched again: the reference `names`
    must agree with, on prompts short enough for it."""
    sentence_start = re.compile(r"(^|[.!?]\s+|\n)\s*$")
    found = []
    for match in re.finditer(r"\b[A-Z][a-z]+\b", text):
        if not sentence_start.search(text[: match.start()]) and match.group() not in found:
            found.append(match.group())
    return found


ORDINARY = [
    IOI,
    "When Mary left. Then John came! Who? Anne",
    "  Then Ann met Bob.\nBob smiled;  Ann? Carl\tand Dee,\r\nEve (Fay) \u00a0Gus. . Hal",
    "The capital of France is Paris, and of Italy, Rome.\n\nBerlin is Germany's.",
    "McDonald met Éva and Zoë at Al's; O'Brien too. IBM? Ok.",
]


@pytest.mark.parametrize("prompt", ORDINARY)
def test_names_are_found_as_the_definition_finds_them(prompt):
    assert names(prompt) == names_by_definition(prompt)


def test_names_agree_with_the_definition_on_random_text_of_names_stops_and_spaces():
    pieces = ["Ann", "Bob", "al", "Al", "É", "x", "3", "_", ",", ".", "!", "?"]
    pieces += [" ", "  ", "\n", "\t", "\xa0"]  # (a no-break space is whitespace too)
    generator = random.Random(52)
    for _ in range(5_000):
        text = "".join(generator.choice(pieces) for _ in range(generator.randint(0, 14)))
        assert names(text) == names_by_definition(text), repr(text)


LETTERS = str.maketrans("0123456789", "abcdefghij")  # a number written as a name's lower-case letters


@pytest.mark.timeout(30)
def test_a_megabyte_prompt_is_read_in_one_pass():
    """Each capitalised word searched its whole prefix again: 160 KB took 190 s, 1 MB about 3 hours."""
    swap = swap_names(("Then Ann met Bob. " * 60_000)[:1_000_000])
    assert swap.corrupted.startswith("Then Bob met Ann. Then Bob met Ann.")
    assert len(names(" ".join(f"x Q{i:05d}".translate(LETTERS) for i in range(100_000)))) == 100_000
