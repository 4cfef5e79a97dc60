"""The Intervene tab's prompts from the prompt on screen: two names found and swapped (an IOI prompt),
the answer the name said once and the distractor the one said twice; words that start a sentence are
not names, and a prompt that names fewer or more than two people gets no swap."""

from __future__ import annotations

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
