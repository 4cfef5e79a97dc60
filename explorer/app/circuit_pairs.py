"""The Circuit tab's datasets: a built-in set from its name, size and seed (`engine.prompt_sets`), or
pairs a person typed ("clean | corrupted | answer | distractor", one a line) or uploaded as CSV (the
same four columns, an optional header). Every problem is a PromptError naming the pair, for the page to
show; nothing a person wrote is trusted further than as text."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import NamedTuple

from explorer.app import markup
from explorer.engine import prompt_sets
from explorer.errors import CheckpointError, PromptError
from explorer.views import circuits as circuit_views

MAX_PAIRS = 16  # the app's bound on a dataset: every method's work grows with the pairs
MAX_BYTES = 64 << 10  # a typed or uploaded dataset's text
COLUMNS = ("clean", "corrupted", "answer", "distractor")
SOURCES = {"built-in": "Built-in", "typed": "Typed pairs", "csv": "CSV file"}  # by the tab's choice


class BuiltIn(NamedTuple):
    name: str
    size: int
    seed: int


FIRST = BuiltIn("ioi", 8, 0)  # the built-in set the tab opens with


def built_in(name: str, size, seed, tokenizer) -> prompt_sets.PromptSet:
    if name not in prompt_sets.BUILT_IN:
        raise PromptError(f"There is no built-in dataset {name!r}: {', '.join(prompt_sets.BUILT_IN)}.")
    size, seed = _integer(size, "size", 1, MAX_PAIRS), _integer(seed, "seed", 0, 2**31 - 1)
    try:
        return prompt_sets.built_in(name, size, seed, tokenizer)
    except ValueError as error:
        raise PromptError(f"The {name} dataset cannot be made for this model: {error}.") from None


def chosen(source, name, size, seed, typed_text, upload, tokenizer) -> prompt_sets.PromptSet:
    """The pairs the tab's inputs name: the built-in set's, the typed ones, or the uploaded CSV's."""
    if source == "built-in":
        return built_in(name, size, seed, tokenizer)
    if source == "typed":
        return typed(typed_text or "")
    if source == "csv":
        if not upload or not os.path.isfile(upload):
            raise PromptError("Upload a CSV of pairs first: clean, corrupted, answer, distractor.")
        return read_csv(upload)
    raise PromptError(f"There is no dataset source {source!r}: {', '.join(SOURCES)}.")


def table(pairs: prompt_sets.PromptSet, source: str, seed=0) -> str:
    """The pairs a circuit ran on, as the table under the tab's inputs shows them."""
    return markup.pairs_table(
        circuit_views.pair_rows(pairs), f"The circuit on screen ran on {_described(pairs, source, seed)}"
    )


def preview(name, size, seed, tokenizer) -> str:
    """A built-in set's pairs for the model loaded, before anything runs on them (or why it cannot be
    made: a warning in the table's place)."""
    try:
        pairs = built_in(name, size, seed, tokenizer)
    except PromptError as error:
        return markup.status(str(error), "warning")
    said = f"The dataset picked, for the model loaded: {_described(pairs, 'built-in', seed)}"
    return markup.pairs_table(circuit_views.pair_rows(pairs), said)


def opening(workspace) -> str:
    """The FIRST set's pairs for the default model, as the tab opens ('' where that model failed)."""
    try:
        return preview(*FIRST, workspace.explorer("").tokenizer)
    except CheckpointError:
        return ""


def _described(pairs: prompt_sets.PromptSet, source: str, seed) -> str:
    """How many pairs, from where (the seed: a built-in's, already checked)."""
    count = f"{len(pairs)} pair{'s' * (len(pairs) != 1)}"
    if source == "built-in":
        return f"{count} of the built-in {pairs.name} set, seed {int(float(seed))}"
    return f"{count} typed" if source == "typed" else f"{count} read from the CSV"


def _integer(value, what: str, low: int, high: int) -> int:
    try:
        number = int(float(value))
    except (TypeError, ValueError, OverflowError):
        raise PromptError(f"The {what} must be a whole number from {low} to {high}.") from None
    if not low <= number <= high:
        raise PromptError(f"The {what} must be a whole number from {low} to {high}, not {number}.")
    return number


def typed(text: str) -> prompt_sets.PromptSet:
    """Pairs typed one a line, "clean | corrupted | answer | distractor"; blank lines skipped."""
    _check_size(text)
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    return _pairs([(n, line.split("|")) for n, line in rows], "line")


def from_csv(text: str) -> prompt_sets.PromptSet:
    """Pairs from CSV text: four columns (clean, corrupted, answer, distractor), a header optional."""
    _check_size(text)
    try:
        rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1) if any(row)]
    except csv.Error as error:
        raise PromptError(f"The CSV cannot be read: {error}.") from None
    if rows and [cell.strip().lower() for cell in rows[0][1]] == list(COLUMNS):
        rows = rows[1:]
    return _pairs(rows, "row")


def read_csv(path: str | Path) -> prompt_sets.PromptSet:
    """Pairs from an uploaded CSV file (`from_csv`). Read as UTF-8 with the byte order mark Excel
    writes at the start of its "CSV UTF-8" left out, which would otherwise make the header a pair."""
    if Path(path).stat().st_size > MAX_BYTES:
        raise PromptError(f"The CSV is larger than this app takes ({MAX_BYTES >> 10} KiB).")
    return from_csv(Path(path).read_text(encoding="utf-8-sig", errors="replace"))


def _check_size(text) -> None:
    if not isinstance(text, str):
        raise PromptError("The pairs must be text.")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise PromptError(f"The pairs are longer than this app takes ({MAX_BYTES >> 10} KiB).")


def _pairs(rows: list[tuple[int, list[str]]], unit: str) -> prompt_sets.PromptSet:
    if not rows:
        raise PromptError(
            "There are no pairs: write one a line, clean | corrupted | answer | distractor "
            '(e.g. "When Mary and John went out, John gave it to | When Mary and John went out, '
            'Anna gave it to | Mary | John"; the answer and distractor start with a space where the '
            "token does, as the pipe's neighbours are kept as written)."
        )
    if len(rows) > MAX_PAIRS:
        raise PromptError(f"There are {len(rows)} pairs: this app takes at most {MAX_PAIRS}.")
    found: list[list[str]] = [[], [], [], []]
    for i, (number, cells) in enumerate(rows, 1):
        if len(cells) != 4:
            raise PromptError(
                f"Pair {i} ({unit} {number}) has {len(cells)} fields: it needs 4, clean | corrupted | "
                "answer | distractor."
            )
        clean, corrupted = cells[0].strip(), cells[1].strip()
        answer, distractor = _token_text(cells[2]), _token_text(cells[3])
        for name, value in zip(COLUMNS, (clean, corrupted, answer, distractor), strict=True):
            if not value.strip():
                raise PromptError(f"Pair {i} ({unit} {number}) has an empty {name}.")
        for column, value in zip(found, (clean, corrupted, answer, distractor), strict=True):
            column.append(value)
    return prompt_sets.PromptSet("typed", *found)


def _token_text(cell: str) -> str:
    """An answer or distractor as typed beside a separator: " Mary " means the token " Mary"."""
    word = cell.strip()
    return f" {word}" if cell.startswith(" ") and word else word


def as_text(pairs: prompt_sets.PromptSet) -> str:
    """The pairs as the box shows them, one a line (what `typed` reads back)."""
    return "\n".join(
        " | ".join(row)
        for row in zip(pairs.clean, pairs.corrupted, pairs.answers, pairs.distractors, strict=True)
    )
