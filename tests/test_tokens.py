"""Token display strings: characters, never bytes. A character a byte-level tokenizer splits over
several tokens labels each of them with the character and which of its bytes it holds."""

from __future__ import annotations

import pytest

import explorer
from explorer.engine.tokens import display_tokens, next_token_labels


@pytest.fixture(scope="module")
def bundled():
    return explorer.load(device="cpu").tokenizer


def labels(tokenizer, text):
    ids = tokenizer.encode(text).ids
    shown = display_tokens(tokenizer, ids)
    assert len(shown) == len(ids)  # honest: one label per token, always
    return shown


def test_a_character_split_over_two_tokens_labels_both_halves(bundled):
    shown = labels(bundled, "Crème brûlée")
    split = [t for t in shown if t.hover != t]
    assert [str(t) for t in split[:2]] == ["è¹", "è²"]
    assert split[0].hover == "è¹ (byte 1 of 2 of “è”)" and split[1].hover == "è² (byte 2 of 2 of “è”)"


def test_an_emoji_and_a_dash_show_as_themselves_never_as_escapes(bundled):
    for text, character, size in (("a 🌹 rose", "🌹", 4), ("To die—to sleep", "—", 3)):
        shown = labels(bundled, text)
        joined = "".join(shown)
        assert "\\x" not in joined and "\ufffd" not in joined and character in joined
        parts = [t for t in shown if character in t]
        assert all(f"of {size} of “{character}”" in t.hover for t in parts)


def test_whole_tokens_keep_their_text(bundled):
    shown = labels(bundled, "To be, or not to be")
    assert "".join(shown) == "To be, or not to be" and all(t.hover == t for t in shown)


def test_smollm2_merges_bytes_where_it_can_and_labels_the_rest(smollm2_explorer):
    tokenizer = smollm2_explorer.tokenizer
    shown = labels(tokenizer, "Crème brûlée 🌹")
    assert [str(t) for t in shown[:3]] == ["Cr", "è", "me"]  # its vocabulary has è whole
    rose = [t for t in shown if "🌹" in t]
    assert [str(t) for t in rose] == [" 🌹¹⁻²", "🌹³", "🌹⁴"]
    assert rose[0].hover.endswith("(bytes 1–2 of 4 of “🌹”)")


def test_a_next_token_is_labelled_as_it_reads_after_the_prompt(smollm2_explorer):
    tokenizer = smollm2_explorer.tokenizer
    prompt, rose = tokenizer.encode("I love").ids, tokenizer.encode(" 🌹").ids
    first = next_token_labels(tokenizer, prompt, rose[:1])[0]
    assert str(first) == " ◌¹⁻²" and "of a 4-byte character the next tokens complete" in first.hover
    last = next_token_labels(tokenizer, prompt + rose[:2], rose[2:])[0]
    assert str(last) == "🌹⁴" and last.hover.endswith("(byte 4 of 4 of “🌹”)")
