"""The pairs a circuit runs on, shown in the Circuit tab: a row per pair (built-in, typed or read from a
CSV alike), the words each corruption changes marked, everything a person wrote shown as text; a
built-in set's table as soon as it is picked, and why where it cannot be made for the model."""

from __future__ import annotations

import html
import re

import pytest

import explorer
from explorer.app import circuit_pairs
from explorer.views import circuits as circuit_views

IOI = "When Mary and John went to the store, John gave a drink to"
ROW = re.compile(r"<tr><td>(\d+)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>")


@pytest.fixture(scope="module")
def tokenizer():
    return explorer.load(device="cpu").tokenizer  # the bundled model's


def rows_of(table: str) -> list[tuple[str, ...]]:
    return ROW.findall(table)


def marked(cell: str) -> list[str]:
    return re.findall(r"<mark>(.*?)</mark>", cell)


def text_of(cell: str) -> str:
    return html.unescape(re.sub(r"</?mark>", "", cell))


@pytest.mark.parametrize(
    ("corrupted", "changed"),
    [
        ("When Mary and John went to the store, Anna gave a drink to", ["Anna"]),  # ABC: one mention
        ("When Mary and John went to the store, Mary gave a drink to", ["Mary"]),  # the docs' IOI pair
        ("When John and Mary went to the store, Mary gave a drink to", ["John", "Mary", "Mary"]),  # both
        ("When Mary and John went to the big store, John gave a drink to", ["big "]),  # a word more
        (IOI, []),
    ],
)
def test_the_words_a_corruption_changes_are_marked_and_make_up_the_corrupted_prompt(corrupted, changed):
    pieces = circuit_views.changed_words(IOI, corrupted)
    assert "".join(piece for piece, _ in pieces) == corrupted
    assert [piece for piece, is_changed in pieces if is_changed] == changed


def test_a_built_in_sets_table_lists_its_pairs_in_order_its_changed_names_marked(tokenizer):
    chosen = circuit_pairs.built_in("ioi", 3, 5, tokenizer)
    table = circuit_pairs.preview("ioi", 3, 5, tokenizer)
    assert "3 pairs of the built-in ioi set, seed 5" in table
    rows = rows_of(table)
    assert [int(number) for number, *_ in rows] == [1, 2, 3]
    for (_, clean, corrupted, answer, distractor), *pair in zip(rows, *chosen.args(), strict=True):
        assert [html.unescape(clean), text_of(corrupted)] == pair[:2]
        assert [answer, distractor] == [f"“{pair[2]}”", f"“{pair[3]}”"]  # quoted: the leading space shows
        third_name = set(pair[1].split()) - set(pair[0].split())  # ABC: the subject's second mention
        assert marked(corrupted) == list(third_name)


def test_typed_and_csv_pairs_show_their_markup_as_text_in_the_table_of_what_ran():
    hostile = "<img src=x onerror=alert(1)> met Tom, Tom gave it to"
    typed = f"{hostile} | <b>Ann</b> met Tom, Tom gave it to | <i>x</i> | Tom\n{IOI} | {IOI}. | Mary | John"
    table = circuit_pairs.table(circuit_pairs.typed(typed), "typed")
    assert "The circuit on screen ran on 2 pairs typed" in table
    assert "<img" not in table and "<b>" not in table and "<i>" not in table
    first, second = rows_of(table)
    assert html.unescape(first[1]) == hostile and first[3] == "“ &lt;i&gt;x&lt;/i&gt;”"
    assert marked(first[2]) == ["&lt;b&gt;Ann&lt;/b&gt;"] and marked(second[2]) == ["to."]
    csv = f'clean,corrupted,answer,distractor\n"{IOI}","{IOI.replace("John gave", "Ann gave")}", Mary, John\n'
    table = circuit_pairs.table(circuit_pairs.from_csv(csv), "csv")
    assert "1 pair read from the CSV" in table and rows_of(table)[0][3] == "“ Mary”"


def test_a_built_in_set_that_cannot_be_made_says_why_in_the_tables_place(tokenizer):
    table = circuit_pairs.preview("ioi", 17, 0, tokenizer)
    assert "status-warning" in table and "from 1 to 16" in table and not rows_of(table)
