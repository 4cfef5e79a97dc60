"""The Lens tab's figures as a person reads them: rows named by the block they follow (so "after block
23" meets head 23.4), every cell's token whole for the page to fit and no space shown as an escape, a
rank axis labelled by decades in full, and a title that says whose target it is."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer import views
from explorer.engine.tokens import printable
from explorer.figures.lens import CELL_CHARS, lens_figure, rank_figure, rank_ticks

PROMPT = "Now is the winter of our discontent made glorious summer"


@pytest.fixture(scope="module")
def run():
    return explorer.load(device="cpu").run(PROMPT)


def test_the_lens_rows_are_the_embeddings_then_the_stream_after_each_block(run):
    fig = views.lens_grid(run).figure()
    n_layers = run.config.n_layers
    ticks = fig.layout.yaxis.labelalias
    assert ticks == {"0": "emb", **{str(b + 1): str(b) for b in range(n_layers)}}
    hover = fig.data[0].customdata  # [L+1][P]
    assert hover[0][0].startswith("the embeddings<br>")
    assert hover[3][0].startswith("after block 2<br>")  # the row a head 2.x writes into
    assert hover[n_layers][0].startswith(f"after block {n_layers - 1}: the output<br>")
    assert "block" in fig.layout.yaxis.title.text


def test_the_grid_carries_every_token_whole_for_the_page_and_a_short_one_for_an_export(run):
    fig = views.lens_grid(run).figure()
    whole, short = fig.data[0].meta["fit_text"], fig.data[0].text
    assert any(len(label) > CELL_CHARS for row in whole for label in row)  # " glorious", " summer"
    for whole_row, short_row in zip(whole, short, strict=True):
        for label, cut in zip(whole_row, short_row, strict=True):
            assert len(cut) <= CELL_CHARS and (cut == label or label.startswith(cut[:-1]))


def test_a_no_break_space_is_drawn_as_a_mark_never_as_an_escape():
    assert printable("\xa0") == "⍽" and printable("a\u2009b") == "a⍽b" and printable("\u3000") == "⍽"
    assert printable("  ") == "␣␣" and printable("\n") == "↵" and printable("\x0b") == "\\x0b"
    tops = [[["\xa0", "x"], [" Paris", "y"]], [["z", "x"], ["z", "y"]]]  # [L+1 = 2][P = 2][k = 2]
    fig = lens_figure(["a", "b"], [0, 1], tops, np.full((2, 2, 2), 0.5), np.zeros((2, 2)))
    assert fig.data[0].meta["fit_text"][0] == ["⍽", " Paris"]
    assert "\\x" not in str(fig.data[0].text) and "\\x" not in str(fig.data[0].customdata)


def test_the_rank_axis_labels_every_decade_in_full():
    assert rank_ticks(5_123) == ([1, 10, 100, 1_000, 10_000], ["1", "10", "100", "1,000", "10,000"])
    assert rank_ticks(1) == ([1, 10], ["1", "10"])
    fig = rank_figure(" Mary", np.array([4_000, 80, 1]), np.array([0.0, 0.01, 0.9]), (5, " to"))
    axis = fig.layout.yaxis
    assert axis.type == "log" and list(axis.tickvals) == [1, 10, 100, 1_000, 10_000]
    assert list(axis.ticktext) == ["1", "10", "100", "1,000", "10,000"]
    assert fig.data[0].hovertemplate == "%{customdata}: rank %{y:,}<extra></extra>"
    assert list(fig.data[0].customdata) == ["the embeddings", "after block 0", "after block 1: the output"]


def test_the_rank_title_says_whether_the_target_was_typed_or_is_the_models_prediction(run):
    predicted = views.target_rank(run, None, -1).figure().layout.title.text
    typed = views.target_rank(run, " the", -1).figure().layout.title.text
    assert "(the model's prediction there)" in predicted and "“␣the”" not in predicted
    assert typed.startswith("“ the” (typed)")
