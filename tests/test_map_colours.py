"""A long prompt's softmax maps are not white: past DATA_RANGE_FROM positions a linear scale tops out
where the rows typically peak (its bar says so, "≥ 0.01" at the top); a short prompt's runs 0 to 1,
and log colours keep their decades."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import all_heads_figure
from explorer.figures.codec import encode_probs
from explorer.figures.maps import DATA_RANGE_FROM, colour_top, map_heatmap


def spread_rows(n: int) -> np.ndarray:
    """A causal map whose every row spreads evenly over its keys: row i holds 1/(i + 1).  # [N, N]"""
    return np.tril(np.ones((n, n), np.float32)) / np.arange(1, n + 1, dtype=np.float32)[:, None]


def test_a_short_prompts_scale_runs_from_0_to_1():
    assert colour_top([encode_probs(spread_rows(DATA_RANGE_FROM - 1))]) == 1.0


@pytest.mark.parametrize("n", [384, 600])  # exact float32, and pooled 8-bit codes
def test_a_long_prompts_scale_tops_out_where_its_rows_peak_and_its_bar_says_so(n):
    encoded = encode_probs(spread_rows(n))
    top = colour_top([encoded])
    assert top == 0.01  # rows peak at 1/(i + 1): half of them under 2/N
    trace = map_heatmap(encoded, "p", ("x", "y"), dict(orientation="h"), top=top)
    scale = 1 if encoded.exact else 100
    unit = "" if encoded.exact else "%"
    assert trace["zmax"] == pytest.approx(top * scale)
    assert trace["colorbar"]["ticktext"][-1] == f"≥ {top * scale:g}{unit}"
    logged = map_heatmap(encoded, "p", ("x", "y"), dict(orientation="h"), log_colours=True, top=top)
    assert logged["zmax"] == scale  # log colours keep their decades up to 1


def test_every_thumbnail_of_a_layer_shares_one_top():
    thin, peaked = spread_rows(300), spread_rows(300)
    peaked[np.arange(300), np.arange(300)] += 0.05  # each row's own key a little more
    fig = all_heads_figure([str(i) for i in range(300)], np.stack([thin, peaked]), np.array([0, 0]), "layer")
    tops = {trace.zmax for trace in fig.data if trace.type == "heatmap"}
    assert len(tops) == 1 and tops.pop() < 100  # percent codes: one top, where both heads' rows peak
