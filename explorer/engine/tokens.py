"""Text in, token ids and their display strings out.

A display string is what a person should see for a token: the text it stands for. A byte-level
tokenizer may split one character over several tokens (an emoji in two, an é in two); such a token is
labelled with the character it is part of and which of its bytes it holds, counted 1-based in
superscripts: "é¹" and "é²" for the two halves of é, "🌹¹⁻³" for the first three bytes of 🌹. Its
`hover` spells that out ("byte 1 of 2 of “é”"). The number of tokens never changes, and no byte is
ever shown as an escape (\\xc3). Labels are made for a sequence at once, since a character split over
tokens can only be named from its neighbours; a next token is labelled after its prompt.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache

from tokenizers import Tokenizer

from explorer.errors import PromptError

# Characters kept per token allowed, cut before tokenizing (tokenizing is linear in the text, and a
# 50 MB prompt must not hold the server for a minute). English runs about 4 characters per token, so
# only a prompt that would lose tokens anyway loses characters.
CHARS_PER_TOKEN = 16


@dataclass(frozen=True)
class Encoded:
    ids: list[int]  # what the model sees
    tokens: list[str]  # display strings, one per id
    n_dropped: int  # tokens cut from the end to fit the context
    n_chars_dropped: int = 0  # characters cut from the end before tokenizing


def char_budget(max_tokens: int) -> int:
    """The characters of a prompt that are tokenized when at most `max_tokens` tokens are kept."""
    return max_tokens * CHARS_PER_TOKEN


def encode(tokenizer: Tokenizer, text: str, max_tokens: int, labelled: bool = True) -> Encoded:
    """The text's ids, cut to `max_tokens`, with their display strings (none where not `labelled`)."""
    if not isinstance(text, str) or not text or text.isspace():  # (strip would copy a 50 MB prompt)
        raise PromptError("The prompt is empty: type some text to see how the model attends to it.")
    kept_text = text[: char_budget(max_tokens)]
    check_characters(kept_text, "The prompt")
    ids = tokenizer.encode(kept_text).ids
    if not ids:
        raise PromptError("The prompt encodes to no tokens.")
    kept = ids[:max_tokens]
    return Encoded(
        ids=kept,
        tokens=display_tokens(tokenizer, kept) if labelled else [],
        n_dropped=len(ids) - len(kept),
        n_chars_dropped=len(text) - len(kept_text),
    )


def encode_ids(tokenizer: Tokenizer, ids, max_tokens: int, vocab_size: int, labelled: bool = True) -> Encoded:
    """Token ids as given (a sequence of whole numbers of the vocabulary: the model's rows the tokenizer
    names), cut to `max_tokens`, with the tokenizer's labels (none where not `labelled`); one that is not
    is refused, naming it."""
    if isinstance(ids, str | bytes) or not hasattr(ids, "__len__"):
        raise PromptError(f"Token ids are a list of whole numbers, got {type(ids).__name__}.")
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    if not ids:
        raise PromptError("The token ids are empty: give at least one.")
    size = min(tokenizer.get_vocab_size(), vocab_size)
    for position, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
            what = f"Token id {value!r} at position {position}"
            raise PromptError(f"{what} is not an id of this vocabulary (0 to {size - 1:,}).")
    kept = ids[:max_tokens]
    tokens = display_tokens(tokenizer, kept) if labelled else []
    return Encoded(ids=kept, tokens=tokens, n_dropped=len(ids) - len(kept), n_chars_dropped=0)


def check_characters(text: str, what: str) -> None:
    """Refuse text holding a lone surrogate (JSON can carry "\\ud800"; a tokenizer cannot read it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PromptError(
            f"{what} holds a lone surrogate (U+{ord(text[error.start]):04X}, character {error.start:,}): "
            "half of a UTF-16 pair, which is not a character. Remove it and try again."
        ) from None


def quoted(text: str, most: int = 40) -> str:
    """A person's text as a message quotes it: whole up to `most` characters, else its start and '…'."""
    return text if len(text) <= most else text[: most - 1] + "…"


class TokenText(str):
    """A token's display string, with `hover`: the same text, or for a token holding part of a
    character, which bytes of which character it holds."""

    hover: str

    def __new__(cls, label: str, hover: str | None = None):
        text = super().__new__(cls, label)
        text.hover = label if hover is None else hover
        return text


SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
UNKNOWN = "◌"  # stands for a character whose remaining bytes are not in the sequence (yet)
BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")  # SentencePiece byte-fallback pieces


def display_tokens(tokenizer: Tokenizer, ids: list[int]) -> list[TokenText]:
    """Display strings of a sequence of tokens, characters split over tokens labelled by part."""
    texts, raw = [], []
    for token_id in ids:
        text = tokenizer.decode([token_id], skip_special_tokens=False)
        piece = None if "\ufffd" not in text else _raw_bytes(tokenizer, token_id)
        texts.append(text)
        raw.append(piece if piece is not None else text.encode("utf-8"))
    ends = _character_ends(b"".join(raw))
    labels, position = [], 0
    for text, piece in zip(texts, raw, strict=True):
        start, position = position, position + len(piece)
        labels.append(TokenText(text) if "\ufffd" not in text else _part_label(raw, ends, start, position))
    return labels


def next_token_labels(tokenizer: Tokenizer, context: list[int], candidates: list[int]) -> list[TokenText]:
    """Each candidate next token labelled as it would read after `context` (it may finish a character
    the context began, or begin one)."""
    tail = context[-4:]  # a UTF-8 character spans at most 4 bytes, so at most 4 tokens
    return [display_tokens(tokenizer, [*tail, c])[-1] for c in candidates]


def _raw_bytes(tokenizer: Tokenizer, token_id: int) -> bytes | None:
    """The bytes a token stands for, where its decoded text hides them: a byte-level BPE token or a
    SentencePiece byte-fallback piece holding part of a character."""
    raw = tokenizer.id_to_token(token_id) or ""
    fallback = BYTE_FALLBACK.match(raw)
    if fallback:
        return bytes([int(fallback.group(1), 16)])
    byte_of = _byte_level_decoder()
    if raw and all(ch in byte_of for ch in raw):
        return bytes(byte_of[ch] for ch in raw)
    return None


def _character_ends(stream: bytes) -> dict[int, tuple[int, str]]:
    """For each byte offset where a character ends: (where it started, the character). A byte that
    is not valid UTF-8 stands alone as U+FFFD; an unfinished character at the end stands as ◌."""
    ends, position = {}, 0
    while position < len(stream):
        length = _utf8_length(stream[position])
        chunk = stream[position : position + length]
        try:
            character = chunk.decode("utf-8")
        except UnicodeDecodeError:
            if len(chunk) < length and _continues(chunk):
                character = UNKNOWN  # cut short by the end of the sequence
            else:
                character, length = "\ufffd", 1
        position += min(length, len(chunk))
        ends[position] = (position - min(length, len(chunk)), character)
    return ends


def _utf8_length(lead: int) -> int:
    return (
        1
        if lead < 0x80
        else 2
        if lead >> 5 == 0b110
        else 3
        if lead >> 4 == 0b1110
        else 4
        if lead >> 3 == 0b11110
        else 1
    )


def _continues(chunk: bytes) -> bool:
    return all(b >> 6 == 0b10 for b in chunk[1:])


def _part_label(raw: list[bytes], ends: dict[int, tuple[int, str]], start: int, stop: int) -> TokenText:
    """The label of the token holding bytes [start, stop) of the stream: each character it touches,
    whole ones as they are, parts with the 1-based numbers of the bytes it holds as superscripts."""
    label, notes = "", []
    for end in sorted(e for e in ends if e > start):
        first, character = ends[end]
        if first >= stop:
            break
        low, high = max(first, start), min(end, stop)
        if (low, high) == (first, end) and character != UNKNOWN:
            label += character
            if character == "\ufffd":
                notes.append("a lone byte of a character split over tokens")
            continue
        size = _utf8_length(_byte_at(raw, first)) if character == UNKNOWN else end - first
        span = f"{low - first + 1}" if high - low == 1 else f"{low - first + 1}-{high - first}"
        label += character + span.translate(SUPERSCRIPTS)
        what = (
            f"a {size}-byte character the next tokens complete" if character == UNKNOWN else f"“{character}”"
        )
        notes.append(f"byte{'s' if high - low > 1 else ''} {span.replace('-', '–')} of {size} of {what}")
    return TokenText(label, f"{label} ({'; '.join(notes)})")


def _byte_at(raw: list[bytes], offset: int) -> int:
    return b"".join(raw)[offset]


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
OTHER_SPACE = "⍽"  # a space that is not the plain one: no-break, thin, ideographic … (Unicode's Zs)


def printable(token: str) -> str:
    """A display string as a label: newlines, tabs and control characters drawn visibly (↵, ⇥, \\x0b),
    every space but the plain one as ⍽, and a token of plain spaces alone as ␣, so no token shows as
    nothing and none as an escape of a space."""
    visible = "".join(
        VISIBLE_WHITESPACE.get(
            ch,
            ch
            if ch.isprintable() or ch == " "
            else OTHER_SPACE
            if unicodedata.category(ch) == "Zs"
            else ch.encode("unicode_escape").decode(),
        )
        for ch in token
    )
    return (visible.replace(" ", "␣") if not visible.strip() else visible) or "∅"
