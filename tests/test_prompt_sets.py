"""The built-in prompt sets read as English over many seeds, every sentence a pair can hold: an
indefinite article agrees with the sound of the word after it, sentences start with a capital, words
stand one space apart with no space before punctuation, the IOI's two names differ and its subject
comes back as itself (clean) or as a third name (corrupted). Their equal lengths and seeding:
tests/test_circuits.py."""

from __future__ import annotations

import re

import pytest

from explorer.engine import prompt_sets

SEEDS = range(200)
PAIRS = 16
# Words whose first letter misleads: said with a vowel first ("an hour"), or with a consonant ("a unit").
VOWEL_SOUND = ("hour", "honest", "honour", "heir")
CONSONANT_SOUND = ("uni", "use", "usu", "one", "once", "eu", "ewe")


def prompts(name: str) -> list[str]:
    """Every clean and corrupted prompt of the built-in set over SEEDS."""
    found = []
    for seed in SEEDS:
        data = prompt_sets.built_in(name, PAIRS, seed)
        found += data.clean + data.corrupted
    return found


def said_with_a_vowel_first(word: str) -> bool:
    word = word.lower()
    if word.startswith(VOWEL_SOUND):
        return True
    return not word.startswith(CONSONANT_SOUND) and word[0] in "aeiou"


@pytest.mark.parametrize("name", sorted(prompt_sets.BUILT_IN))
def test_an_indefinite_article_agrees_with_the_sound_of_the_word_after_it(name):
    articles = [
        (article, word)
        for prompt in prompts(name)
        for article, word in re.findall(r"\b(an?) (\w+)", prompt, re.I)
    ]
    wrong = {
        f"{article} {word}"
        for article, word in articles
        if (article.lower() == "an") != said_with_a_vowel_first(word)
    }
    assert not wrong
    if name == "ioi":  # both articles are drawn, so the test reads each
        assert {article for article, _ in articles} == {"a", "an"}


@pytest.mark.parametrize("name", ["ioi", "factual"])
def test_sentences_start_with_a_capital_and_words_stand_one_space_apart(name):
    for prompt in prompts(name):
        assert prompt == prompt.strip() and "  " not in prompt, prompt
        assert not re.search(r" [,.:;!?]|[,.:;!?](?=\S)", prompt), prompt
        for sentence in re.split(r"(?<=[.!?]) ", prompt):
            assert sentence[0].isupper(), prompt


def test_the_ioi_names_two_people_and_its_subject_comes_back_as_itself_or_a_third_name():
    shape = re.compile(
        r"^(?:When|After|Then,|While) (\w+) and (\w+) .*[,.] (\w+) (?:gave|handed|passed) an? \w+ to$"
    )
    for seed in SEEDS:
        data = prompt_sets.ioi(PAIRS, seed)
        for clean, corrupted, answer, distractor in zip(*data.args(), strict=True):
            a, b, subject = shape.match(clean).groups()
            first, second, other = shape.match(corrupted).groups()
            assert a != b and (a, b) == (first, second), clean
            assert subject == b and (" " + a, " " + b) == (answer, distractor), clean
            assert other not in (a, b), corrupted


def test_induction_prompts_are_the_lists_words_one_space_apart():
    words = {*prompt_sets.NAMES, *prompt_sets.PLACES, *prompt_sets.OBJECTS}
    for prompt in prompts("induction"):
        assert prompt.startswith(" ") and set(prompt[1:].split(" ")) <= words, prompt
