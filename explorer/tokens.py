"""Text in, token ids and their display strings out.

Display strings are what a person should see for each token: the text it stands for, or, for a
byte-level token that holds only part of a multi-byte character (an emoji split in two), its bytes
written as escapes (`\\xf0\\x9f`) rather than a row of replacement characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tokenizers import Tokenizer

# Characters kept per token allowed, cut before tokenizing (tokenizing is linear in the text, and a
# 50 MB prompt must not hold the server for a minute). English runs about 4 characters per token, so
# only a prompt that would lose tokens anyway loses characters.
CHARS_PER_TOKEN = 16


class PromptError(ValueError):
    """The prompt cannot be run; the message is meant for the person who typed it."""


@dataclass(frozen=True)
class Encoded:
    ids: list[int]  # what the model sees
    tokens: list[str]  # display strings, one per id
    n_dropped: int  # tokens cut from the end to fit the context
    n_chars_dropped: int = 0  # characters cut from the end before tokenizing


def char_budget(max_tokens: int) -> int:
    """The characters of a prompt that are tokenized when at most `max_tokens` tokens are kept."""
    return max_tokens * CHARS_PER_TOKEN


def encode(tokenizer: Tokenizer, text: str, max_tokens: int) -> Encoded:
    if not isinstance(text, str) or not text or text.isspace():  # (strip would copy a 50 MB prompt)
        raise PromptError("The prompt is empty: type some text to see how the model attends to it.")
    kept_text = text[: char_budget(max_tokens)]
    try:
        kept_text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PromptError(
            f"The prompt holds a lone surrogate (U+{ord(kept_text[error.start]):04X}, character "
            f"{error.start}): half of a UTF-16 pair, which is not a character. Remove it and run again."
        ) from None
    ids = tokenizer.encode(kept_text).ids
    if not ids:
        raise PromptError("The prompt encodes to no tokens.")
    kept = ids[:max_tokens]
    return Encoded(
        ids=kept,
        tokens=display_tokens(tokenizer, kept),
        n_dropped=len(ids) - len(kept),
        n_chars_dropped=len(text) - len(kept_text),
    )


def display_tokens(tokenizer: Tokenizer, ids: list[int]) -> list[str]:
    return [_display(tokenizer, i) for i in ids]


def _display(tokenizer: Tokenizer, token_id: int) -> str:
    text = tokenizer.decode([token_id], skip_special_tokens=False)
    if "\ufffd" not in text:
        return text
    raw = tokenizer.id_to_token(token_id) or text
    byte_of = _byte_level_decoder()
    if all(ch in byte_of for ch in raw):  # a byte-level BPE token holding a partial character
        return bytes(byte_of[ch] for ch in raw).decode("utf-8", errors="backslashreplace")
    return raw  # e.g. SentencePiece byte fallback, already spelled "<0xF0>"


@cache
def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: each byte is written as one printable character."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    for offset, b in enumerate(shifted):
        chars[b] = chr(256 + offset)
    return {ch: b for b, ch in chars.items()}


VISIBLE_WHITESPACE = {"\n": "↵", "\r": "␍", "\t": "⇥"}


def printable(token: str) -> str:
    """A display string as a label: newlines, tabs and control characters drawn visibly (↵, ⇥, \\x0b),
    and a token of spaces alone as ␣, so no token shows as nothing."""
    visible = "".join(
        VISIBLE_WHITESPACE.get(
            ch, ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode()
        )
        for ch in token
    )
    return (visible.replace(" ", "␣") if not visible.strip() else visible) or "∅"
