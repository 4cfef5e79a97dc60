"""Every figure, for the bundled model and a fixed prompt: snapshots of their JSON (typed arrays
decoded, floats rounded, the template left out), the arrays checked against the engine with
tolerances, and the encoding that keeps an update small."""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from plotly.colors import sample_colorscale
from plotly.utils import PlotlyJSONEncoder

import explorer
from explorer import views
from explorer.app import payload
from explorer.engine import heads, rope
from explorer.figures.attention import group_columns
from explorer.figures.codec import MAP_BUDGET_BYTES, encode_probs, encode_signed, lower_triangle_fill, pool
from explorer.figures.common import to_json, token_label
from explorer.figures.maps import SIGNED_COLORSCALE, masked_region
from explorer.figures.plot import Plot
from explorer.figures.rope import wrap_angle
from tests.conftest import make_hf_checkpoint
from tests.tolerant_snapshots import TolerantAmberExtension

PROMPT = "To be, or not to be: that is the question."
LOG = views.MapStyle(log=True)
SIGNIFICANT_DIGITS = 4


@pytest.fixture
def snapshot(snapshot):
    """Text and structure exact, numbers within float32's spread across CPUs (tests/tolerant_snapshots.py)."""
    return snapshot.use_extension(TolerantAmberExtension)


@pytest.fixture(scope="module")
def run():
    return explorer.load(device="cpu").run(PROMPT)


@pytest.fixture(scope="module")
def where(run):
    """The layer, head and RoPE positions the figures show: not the first of anything."""
    config = run.config
    return dict(layer=min(1, config.n_layers - 1), head=config.n_heads - 1, query=run.n_tokens - 1, key=2)


@pytest.fixture(scope="module")
def figures(run, where):
    layer, head, query, key = where["layer"], where["head"], where["query"], where["key"]
    return {
        "pipeline": views.pipeline(run, layer, head),
        "all_heads": views.all_heads(run, layer),
        "rope_angles": views.rope_angles(run),
        "rope_wavelengths": views.rope_wavelengths(run),
        "rope_rotation": views.rope_rotation(run, layer, head, query, key),
        "rope_score_split": views.rope_score_split(run, layer, head, query, key),
        "gqa_diagram": views.gqa_diagram(run.config),
        "head_similarity": views.head_similarity(run, layer),
        "kv_cache": views.kv_cache(run.config, 4),
        "overview": views.overview(run, views.head_profile(run)),
        "next_tokens": views.next_tokens(run),
    }


def decoded(fig) -> dict:
    """The figure as sent, base64 arrays decoded to numpy."""
    return _decode(json.loads(to_json(fig)))


def _decode(node):
    if isinstance(node, dict) and "bdata" in node:
        array = np.frombuffer(base64.b64decode(node["bdata"]), dtype=np.dtype(node["dtype"]))
        shape = [int(s) for s in str(node.get("shape", len(array))).split(",")]
        return array.reshape(shape)
    if isinstance(node, dict):
        return {key: _decode(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_decode(value) for value in node]
    return node


def snapshot_view(node):
    """Floats rounded, and each decoded array as its dtype, shape and one line of rounded values per
    row, so a snapshot stays readable and stable."""
    if isinstance(node, np.ndarray):
        rows = node.reshape(-1, node.shape[-1]) if node.ndim > 1 else node[None]
        lines = [" ".join(f"{v:.{SIGNIFICANT_DIGITS}g}" for v in row) for row in rows]
        return {"dtype": str(node.dtype), "shape": list(node.shape), "rows": lines}
    if isinstance(node, dict):
        return {key: snapshot_view(value) for key, value in node.items()}
    if isinstance(node, list):
        return [snapshot_view(value) for value in node]
    if isinstance(node, float):
        return node if not math.isfinite(node) or node == 0 else float(f"{node:.{SIGNIFICANT_DIGITS}g}")
    return node


def assert_valid_as_sent(fig: Plot) -> None:
    """The app sends figures as plain values (`Plot`), never validated by plotly: the figure as sent
    must be what plotly validates it into, key order aside (a property Plotly.js would not read raises)."""
    assert json.loads(to_json(fig.figure(), compact=True)) == json.loads(to_json(fig, compact=True))


def traces(fig) -> list[dict]:
    return decoded(fig)["data"]


FIGURE_NAMES = [
    "pipeline",
    "all_heads",
    "rope_angles",
    "rope_wavelengths",
    "rope_rotation",
    "rope_score_split",
    "gqa_diagram",
    "head_similarity",
    "kv_cache",
    "overview",
    "next_tokens",
]


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_figure_matches_its_snapshot(figures, name, snapshot):
    sent = decoded(figures[name])
    sent["layout"].pop("template")
    assert snapshot_view(sent) == snapshot


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_figure_is_sent_as_plotly_validates_it(figures, name):
    assert_valid_as_sent(figures[name])


def test_faithfulness_and_log_coloured_figures_are_sent_as_plotly_validates_them(run, where):
    assert_valid_as_sent(views.faithfulness(run, where["layer"]))
    assert_valid_as_sent(views.pipeline(run, where["layer"], where["head"], LOG))


def test_the_apis_figure_is_plotlys_and_its_edits_are_validated():
    """The figures API returns a validated `go.Figure` (a builder's `.plot` is the app's plain one):
    a notebook's edits are coerced and checked as usual (Plotly.js would ignore a bare string title,
    and an unknown property is an error)."""
    fig = explorer.figures.next_tokens_figure([("a", 0.75), ("<b>", 0.25)])
    assert isinstance(fig, go.Figure)
    assert isinstance(explorer.figures.next_tokens_figure.plot([("a", 1.0)]), Plot)
    fig.update_layout(title="mine", xaxis_title="p")
    fig.update_traces(marker_color="red")
    sent = json.loads(to_json(fig))
    assert sent["layout"]["title"]["text"] == "mine" and sent["layout"]["xaxis"]["title"]["text"] == "p"
    assert sent["data"][0]["marker"]["color"] == "red"
    with pytest.raises(ValueError):
        fig.update_layout(not_a_property=1)
    with pytest.raises(ValueError):
        fig.data[0].not_a_property = 1


@pytest.mark.parametrize("name", ["pipeline", "all_heads", "rope_angles", "overview", "next_tokens"])
def test_a_figure_is_sent_as_plotly_writes_it(figures, name):
    """`sendable` reads the plain figure without Plotly's checks: the JSON is Plotly's own, key order
    aside, and a go.Figure's is Plotly's to the byte."""
    validated = figures[name].figure()
    plotlys = json.dumps(validated.to_plotly_json(), cls=PlotlyJSONEncoder, separators=(",", ":"))
    assert json.loads(to_json(figures[name])) == json.loads(plotlys)
    assert to_json(validated) == plotlys


def test_values_plotly_writes_its_own_way_are_sent_as_it_writes_them():
    """A property's array goes as a typed array (int64 narrowed where it fits), one of text, empty or
    inside a list as a list, one under `range` as numbers, a numpy number as a number, a property set
    to None not at all (but None inside `meta` as null); and the figure is unchanged."""
    fig = Plot(
        [
            dict(
                type="heatmap",
                z=np.arange(6).reshape(2, 3),
                x=np.array([0.5, np.nan, 2.5]),
                y=np.array([70_000, 2**40]),  # too big for 32 bits: numbers
                customdata=[np.arange(3)],
                text=np.array(["a", "<b>"]),
                ids=np.array([], dtype=np.float32),
                colorbar=None,
            )
        ],
        dict(
            xaxis=dict(range=np.array([0.0, 3.0]), title=None),
            meta=dict(limit=np.float32(1.5), gap=None),
            template=dict(layout=dict(font=dict(size=12))),
        ),
    )
    sent = json.loads(to_json(fig))
    assert sent == json.loads(json.dumps(fig.figure().to_plotly_json(), cls=PlotlyJSONEncoder))
    assert sent["data"][0]["z"]["dtype"] == "i1" and sent["data"][0]["customdata"] == [[0, 1, 2]]
    assert sent["layout"]["xaxis"] == {"range": [0.0, 3.0]} and "colorbar" not in sent["data"][0]
    assert sent["layout"]["meta"] == {"limit": 1.5, "gap": None}
    assert isinstance(fig.data[0]["z"], np.ndarray) and fig.data[0]["z"].dtype == np.int64


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_arrays_are_sent_as_typed_base64_not_lists_of_numbers(figures, name):
    """Plotly writes numpy float32/uint8 arrays as base64 `bdata`; a list of numbers costs ~10× more.
    Only a few fixed-size constants (a line's two ends) may be lists."""
    for trace in json.loads(to_json(figures[name]))["data"]:
        for field in ("z", "x", "y", "r", "theta", "customdata"):
            value = trace.get(field)
            if isinstance(value, list):
                numbers = [v for v in np.ravel(np.array(value, dtype=object)) if isinstance(v, (int, float))]
                assert len(numbers) <= 2, field


def test_pipeline_panels_hold_the_heads_stages(run, where, figures):
    att = run.attention(where["layer"])
    stages = {name: t.numpy() for name, t in att.head_stages(where["head"]).items()}
    maps = [t["z"] for t in traces(figures["pipeline"]) if t["type"] == "heatmap"]
    scores, scaled, mask, masked, probs = maps
    np.testing.assert_allclose(scores, stages["scores"], rtol=1e-6)
    np.testing.assert_allclose(scaled, stages["scaled"], rtol=1e-6)
    assert np.array_equal(mask.astype(bool), np.tril(np.ones_like(mask, dtype=bool)))
    assert np.isnan(masked[~att.mask.numpy()]).all()
    np.testing.assert_allclose(masked[att.mask.numpy()], stages["scaled"][att.mask.numpy()], rtol=1e-6)
    np.testing.assert_allclose(probs, stages["probs"], atol=1e-7)
    np.testing.assert_allclose(probs.sum(-1), 1, atol=1e-5)


def test_axes_are_positions_labelled_with_escaped_tokens(run, figures):
    template = decoded(figures["pipeline"])["layout"]["template"]["layout"]
    for axis in (template["xaxis"], template["yaxis"]):
        assert axis["tickmode"] == "linear" and axis.get("type") != "category"
        assert axis["labelalias"] == {str(i): token_label(t) for i, t in enumerate(run.tokens)}
    heatmap = traces(figures["pipeline"])[0]
    assert "%{y:d} “%{y}”" in heatmap["hovertemplate"] and "%{x:d} “%{x}”" in heatmap["hovertemplate"]
    assert "%{z" in heatmap["hovertemplate"]


def test_all_heads_hold_every_heads_map_titled_by_kv_group(run, where, figures):
    att = run.attention(where["layer"])
    sent = decoded(figures["all_heads"])
    maps = np.stack([t["z"] for t in sent["data"]])
    np.testing.assert_allclose(maps, att.probs.numpy(), atol=1e-7)
    n_heads, n = run.config.n_heads, run.n_tokens
    titles = [a["text"] for a in sent["layout"]["annotations"][:n_heads]]
    kv_head = explorer.kv_head_map(*_heads(run)).tolist()
    assert titles == [f"head {h} · kv {kv}" for h, kv in enumerate(kv_head)]
    # each thumbnail names its first and last keys under it; a row's first, its first and last queries
    ends = [a["text"] for a in sent["layout"]["annotations"][n_heads:]]
    assert ends == [token_label(run.tokens[0]), token_label(run.tokens[-1])] * n_heads
    y_axes = [sent["layout"][f"yaxis{'' if h == 0 else h + 1}"] for h in range(n_heads)]
    labelled = [h for h, axis in enumerate(y_axes) if axis.get("showticklabels")]
    cols = group_columns(n_heads, n_heads // run.config.n_kv_heads)
    assert labelled == list(range(0, n_heads, cols)) and all(
        y_axes[h]["tickvals"] == [0, n - 1] for h in labelled
    )


def _heads(run) -> tuple[int, int]:
    return run.config.n_heads, run.config.n_kv_heads


def test_rope_angles_are_positions_times_frequencies_wrapped(run, figures):
    angles = traces(figures["rope_angles"])[0]["z"]
    inv_freq = rope.config_inverse_frequencies(run.config)
    expected = torch.arange(run.n_tokens)[:, None].float() * inv_freq[None]
    assert angles.shape == (run.n_tokens, run.config.head_dim // 2)
    assert (angles > -math.pi).all() and (angles <= math.pi).all()
    np.testing.assert_allclose(np.cos(angles), np.cos(expected.numpy()), atol=1e-5)
    np.testing.assert_allclose(np.sin(angles), np.sin(expected.numpy()), atol=1e-5)


def test_wrap_angle_lands_in_the_half_open_interval():
    wrapped = wrap_angle(np.array([-math.pi, math.pi, 3 * math.pi, 0.5, -7.0], dtype=np.float32))
    np.testing.assert_allclose(wrapped, [math.pi, math.pi, math.pi, 0.5, -7.0 + 2 * math.pi], atol=1e-5)


def test_wavelengths_are_two_pi_over_theta(run, figures):
    wavelengths = traces(figures["rope_wavelengths"])[0]["y"]
    expected = rope.wavelengths(rope.config_inverse_frequencies(run.config)).numpy()
    np.testing.assert_allclose(wavelengths, expected, rtol=1e-6)


def test_rotation_keeps_every_pairs_norm(figures):
    _, before, after = traces(figures["rope_rotation"])[:3]
    np.testing.assert_allclose(before["r"], after["r"])
    turned = (after["theta"] - before["theta"]) % 360
    assert (turned > 1e-3).any()  # a query past position 0 does turn


def test_score_split_sums_to_the_score_of_that_query_and_key(run, where, figures):
    with_rope, without_rope = (t["y"] for t in traces(figures["rope_score_split"]))
    att = run.attention(where["layer"])
    score = att.head_stages(where["head"])["scores"][where["query"], where["key"]]
    assert with_rope.sum() == pytest.approx(float(score), rel=1e-4, abs=1e-4)
    kv = att.kv_head[where["head"]]
    plain = att.q[where["head"], where["query"]] @ att.k[kv, where["key"]]
    assert without_rope.sum() == pytest.approx(float(plain), rel=1e-4, abs=1e-4)


def test_gqa_diagram_joins_each_query_head_to_its_kv_head(run, figures):
    kv_head = explorer.kv_head_map(*_heads(run)).tolist()
    lines = [t for t in traces(figures["gqa_diagram"]) if t["mode"] == "lines"]
    joined = {}
    for kv, line in enumerate(lines):
        for h in line["y"][0::3]:
            joined[int(h)] = kv
    assert [joined[h] for h in range(len(kv_head))] == kv_head


def test_head_similarity_is_the_cosine_of_the_maps(run, where, figures):
    similarity = traces(figures["head_similarity"])[0]["z"]
    probs = run.attention(where["layer"]).probs.flatten(1)
    expected = torch.nn.functional.cosine_similarity(probs[:, None], probs[None], dim=-1)
    np.testing.assert_allclose(similarity, expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(np.diag(similarity), 1, atol=1e-5)


def test_kv_cache_is_two_layers_kv_heads_head_dim_bytes_per_token(run, figures):
    c = run.config
    this_model, mha, mqa = (t["y"] for t in traces(figures["kv_cache"]))
    contexts = np.array(views.kv_cache_contexts(c))
    assert contexts[-1] == c.context_length and len(contexts) == 6  # up to the model's own context
    per_token = 2 * c.n_layers * c.head_dim * 4
    np.testing.assert_array_equal(this_model, per_token * c.n_kv_heads * contexts)
    np.testing.assert_array_equal(mha, per_token * c.n_heads * contexts)
    np.testing.assert_array_equal(mqa, per_token * contexts)


def test_overview_is_the_prompt_profile(run, figures):
    profile = heads.prompt_profile(run)
    panels = [t["z"] for t in traces(figures["overview"])]
    for panel, name in zip(panels, heads.PROFILE_SCORES, strict=True):
        np.testing.assert_allclose(panel, profile[name].numpy(), rtol=1e-5, atol=1e-6)


def test_overview_bars_sit_at_its_foot_under_axes_titled_head(figures):
    """Placed on the figure, each bar goes under its panel's head axis and its title, wherever the
    plot area ends (at -0.3 of it they stood some 170 px below the maps)."""
    layout = figures["overview"].layout
    for trace in traces(figures["overview"]):
        assert trace["colorbar"]["yref"] == "container" and trace["colorbar"]["y"] == 0
        axis = layout[f"xaxis{trace['xaxis'][1:]}"]
        assert axis["title"]["text"] == "head" and axis["automargin"]


def test_the_overviews_axes_are_its_cells_so_the_picked_heads_frame_cannot_move_them(run, figures):
    """The page frames the picked head with a shape; an autoranged axis made room for its line (1.25 px
    each side on a corner head), moving every panel's cells once the frame came after the draw."""
    layout = figures["overview"].layout
    n_layers, n_heads = run.config.n_layers, run.config.n_heads
    for trace in traces(figures["overview"]):
        x, y = layout[f"xaxis{trace['xaxis'][1:]}"], layout[f"yaxis{trace['yaxis'][1:]}"]
        assert tuple(x["range"]) == (-0.5, n_heads - 0.5) and tuple(y["range"]) == (n_layers - 0.5, -0.5)
        assert "autorange" not in x and "autorange" not in y


def test_an_overview_bar_of_three_digit_labels_keeps_them_level_and_few():
    """A mean distance in the hundreds (Gemma 3 over a 1k-token prompt): Plotly stood five labels on end
    below the figure's foot, where the container cut them; three level ones fit under the bar."""
    from explorer.figures.overview import profile_figure

    rng = np.random.default_rng(0)
    profile = {name: rng.random((2, 4)).astype(np.float32) for name in heads.PROFILE_SCORES}
    profile["distance"] = profile["distance"] * 400
    figure = decoded(profile_figure(profile, np.zeros(4, dtype=np.int64)))
    bars = {name: trace["colorbar"] for name, trace in zip(heads.PROFILE_SCORES, figure["data"], strict=True)}
    assert bars["distance"]["nticks"] == 3 and bars["distance"]["tickangle"] == 0
    assert all("nticks" not in bar for name, bar in bars.items() if name != "distance")


def test_next_tokens_are_the_models_most_likely(run, figures):
    bars = traces(figures["next_tokens"])[0]
    expected = run.next_token_probs().topk(views.TOP_NEXT_TOKENS).values.numpy()
    np.testing.assert_allclose(bars["x"], expected, rtol=1e-5)


def test_eager_rerun_matches_sdpa_in_the_faithfulness_view_and_the_attention_view_says_so(run, where):
    check = views.attention.eager_check(run, where["layer"])
    assert check.max_abs_diff <= views.EAGER_TOLERANCE and check.ok
    title = decoded(views.faithfulness(run, where["layer"]))["layout"]["title"]["text"]
    assert f"within the tolerance {check.tolerance:.2e}" in title and "float32 roundings" in title
    all_heads = decoded(views.all_heads(run, where["layer"]))["layout"]["title"]["text"]
    assert f"eager rerun = SDPA to {check.max_abs_diff:.1e}" in all_heads


def test_token_labels_show_markup_and_whitespace_literally():
    assert token_label("<script>") == "&lt;script&gt;"
    assert token_label(" & ") == " &amp; " and token_label('"') == '"'
    assert token_label("\n") == "↵" and token_label("  ") == "␣␣" and token_label("") == "∅"
    assert token_label("\x0b") == "\\x0b" and token_label("🙂") == "🙂"


@pytest.mark.parametrize(
    ("n", "exact", "block", "dtype"),
    [
        (256, True, 1, np.float32),
        (257, False, 1, np.uint8),
        (512, False, 1, np.uint8),
        (700, False, 2, np.uint8),
    ],
)
def test_maps_are_exact_to_256_tokens_8_bit_to_512_pooled_beyond(n, exact, block, dtype):
    rng = np.random.default_rng(0)
    probs = np.tril(rng.random((n, n), dtype=np.float32))
    probs /= probs.sum(-1, keepdims=True)
    scores = rng.normal(size=(n, n)).astype(np.float32)
    for encoded in (encode_probs(probs), encode_signed(scores)):
        assert (encoded.exact, encoded.block, encoded.z.dtype) == (exact, block, dtype)
        assert encoded.z.nbytes <= MAP_BUDGET_BYTES and bool(encoded.note) != exact
    coded = encode_probs(probs)
    if not exact and block == 1:
        np.testing.assert_allclose(coded.z / 100, probs, atol=0.005 + 1e-6)


def test_signed_codes_put_zero_at_the_centre_and_minus_infinity_at_zero():
    values = np.array([[-2.0, -np.inf], [0.0, 2.0]], dtype=np.float32)
    encoded = encode_signed(values, budget_bytes=4)
    assert encoded.z.tolist() == [[1, 0], [128, 255]] and encoded.limit == 2.0


@pytest.mark.parametrize("n", [1, 2, 7])
def test_the_hatched_region_is_exactly_the_upper_triangle(n):
    polygon = masked_region(n, "−∞", ("x", "y"))
    x, y = polygon["x"].astype(float), polygon["y"].astype(float)
    area = 0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1)))  # shoelace
    assert area == pytest.approx(n * (n - 1) / 2)


@pytest.fixture(scope="module")
def long_context_explorer(tmp_path_factory, tiny_tokenizer):
    directory = tmp_path_factory.mktemp("llama-1k-context")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", max_position_embeddings=1024)
    return explorer.load(directory, device="cpu")


@pytest.mark.parametrize("n_tokens", [256, 512, 1024])
def test_no_update_sends_more_than_a_megabyte(long_context_explorer, n_tokens):
    run = long_context_explorer.run("To be, or not to be. " * 300, max_tokens=n_tokens)
    assert run.n_tokens == n_tokens
    assert payload.update_payload_bytes(run, 1, 5) <= 1_000_000


def test_a_zoom_window_is_exact_and_a_too_big_one_is_refused(long_context_explorer):
    run = long_context_explorer.run("To be, or not to be. " * 300, max_tokens=1024)
    fig = decoded(views.zoom(run, 1, 5, (900, 1000, 0, 600)))
    masked, probs = (trace["z"] for trace in fig["data"])
    stages = run.attention(1).head_stages(5)
    np.testing.assert_allclose(probs, stages["probs"][900:1001, :601].numpy(), atol=1e-7)
    finite = np.isfinite(stages["masked"][900:1001, :601].numpy())
    np.testing.assert_allclose(masked[finite], stages["masked"][900:1001, :601].numpy()[finite], rtol=1e-6)
    with pytest.raises(ValueError, match="at most 65,536 cells"):
        views.zoom(run, 1, 5, (0, 300, 0, 300))


def test_the_app_sends_scaled_and_masked_maps_as_a_rule_and_causal_maps_as_their_lower_triangle(figures):
    """Scaled = float32(scores × float32(scale)), as torch multiplies; masked = scaled where allowed:
    the payload leaves both out, and sends the mask and softmax without what lies above the diagonal.
    The page's decoder rebuilds them bit for bit (tests/codec.test.mjs, on the fixtures)."""
    full = traces(figures["pipeline"])
    sent = json.loads(payload.plot_payload(figures["pipeline"])["plot"])["data"]
    assert [trace.get("meta", {}).get("derived", {}).get("op") for trace in sent[:5]] == [
        None, "scale", None, "causal", None
    ]  # fmt: skip
    assert "z" not in sent[1] and "z" not in sent[3]
    assert np.float32(sent[1]["meta"]["derived"]["by"]) * np.asarray(full[0]["z"]) == pytest.approx(
        np.asarray(full[1]["z"]), rel=0, abs=0
    )
    n = len(full[0]["z"])
    for i in (2, 4):
        assert sent[i]["meta"]["packed"] == {"op": "tril", "fill": 0.0}
        assert (
            len(base64.b64decode(sent[i]["z"]["bdata"]))
            == np.dtype(sent[i]["z"]["dtype"]).itemsize * n * (n + 1) // 2
        )


@pytest.mark.parametrize("n_tokens", [7, 1024])
def test_rope_angles_are_sent_as_a_rule_of_their_frequencies(long_context_explorer, n_tokens):
    run = long_context_explorer.run("To be, or not to be. " * 300, max_tokens=n_tokens)
    fig = views.rope_angles(run)
    full = traces(fig)
    sent = payload.plot_payload(fig)["plot"]
    rule = json.loads(sent)["data"][0]["meta"]["derived"]
    assert rule["op"] == "angles" and rule["positions"] == n_tokens
    theta = np.asarray(rule["inv_freq"], dtype=np.float32)
    angles = np.arange(n_tokens, dtype=np.float32)[:, None] * theta  # float32(m × θ_i)
    assert np.array_equal(wrap_angle(angles), full[0]["z"])  # what the page computes, as numpy does
    assert len(sent) < 20_000 + 40 * n_tokens  # the rule and the token labels, not the map


def test_pooling_keeps_each_blocks_largest_or_most_extreme_value_and_leaves_gaps_out():
    nan, inf = math.nan, math.inf
    values = np.array(
        [
            [1.0, -3.0, nan, 0.5, 7.0],
            [2.0, 3.0, -inf, nan, -7.0],
            [nan, nan, 4.0, -5.0, nan],
        ],
        dtype=np.float32,
    )  # blocks of 2: the last row and column of cells are cut by the map's end
    np.testing.assert_array_equal(pool(values, 2, "max"), [[3.0, 0.5, 7.0], [nan, 4.0, nan]])
    # largest magnitude, sign kept; 3 and −3 tie: the positive one; 7 and −7 tie likewise
    np.testing.assert_array_equal(pool(values, 2, "extreme"), [[3.0, 0.5, 7.0], [nan, -5.0, nan]])
    np.testing.assert_array_equal(pool(torch.tensor(values), 1, "max"), values)  # a block of one: as is
    assert pool(values, 2, "max").dtype == np.float32
    stacked = np.stack([values, 2 * values])  # [2, 3, 5]: each leading index pooled alone
    np.testing.assert_array_equal(pool(stacked, 2, "extreme")[1], 2 * pool(values, 2, "extreme"))


def test_a_map_with_anything_above_its_diagonal_is_sent_whole():
    causal = np.tril(np.ones((4, 4), dtype=np.float32))
    assert lower_triangle_fill(causal) == 0.0
    causal[0, 3] = 1e-9
    assert lower_triangle_fill(causal) is None
    assert lower_triangle_fill(np.full((3, 3), np.nan)) is None
    assert lower_triangle_fill(np.ones((2, 3))) is None


@pytest.mark.parametrize(("n_tokens", "rules"), [(400, {1: "same", 3: "causal"}), (800, {1: "same"})])
def test_coded_maps_are_sent_as_rules_too(long_context_explorer, n_tokens, rules):
    """8 bits (400 tokens): scaled shares the raw map's codes, masked is them where allowed; pooled
    (800 tokens): scaled shares the codes, masked (pooled over allowed keys only) is sent. The mask and
    softmax go as lower triangles. (The page's decoder: tests/codec.test.mjs.)"""
    run = long_context_explorer.run("To be, or not to be. " * 300, max_tokens=n_tokens)
    fig = views.pipeline(run, 1, 5)
    full = traces(fig)
    sent = json.loads(payload.plot_payload(fig)["plot"])["data"][:5]
    assert {
        i: t["meta"]["derived"]["op"] for i, t in enumerate(sent) if "derived" in t.get("meta", {})
    } == rules
    assert [i for i, t in enumerate(sent) if "packed" in t.get("meta", {})] == [2, 4]
    assert np.array_equal(full[1]["z"], full[0]["z"])  # "same": one map of codes
    if 3 in rules:  # "causal": the scaled codes where allowed, 0 (a gap) above
        assert np.array_equal(full[3]["z"], np.tril(full[1]["z"]))


def sink_maps(n_heads: int, n_tokens: int) -> np.ndarray:
    """Every query of every head attends to key 0 alone: a perfect sink.  # [H, N, N]"""
    probs = np.zeros((n_heads, n_tokens, n_tokens), dtype=np.float32)
    probs[:, :, 0] = 1
    return probs


@pytest.mark.parametrize("plot_width", [820, 1560])  # px: the page's narrowest all-heads plot, the PNG's
def test_a_sink_heads_first_column_stands_clear_of_its_thumbnail_frame(plot_width):
    """A frame on the cells' edge covered a sink's column 0 (all its attention), and the column read
    as a thicker frame: each frame's line now leaves a pixel or more of white on every side."""
    n_tokens = 60
    fig = explorer.figures.all_heads_figure(
        [f"t{i}" for i in range(n_tokens)], sink_maps(8, n_tokens), np.repeat(np.arange(2), 4), "sinks"
    )
    layout = fig.to_plotly_json()["layout"]
    plot_height = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    for h, frame in enumerate(layout["shapes"]):
        n = "" if h == 0 else str(h + 1)
        (x0, x1), (y0, y1) = layout[f"xaxis{n}"]["domain"], layout[f"yaxis{n}"]["domain"]
        half_line = frame["line"]["width"] / 2
        white = [  # px between the line's inner edge and the cells: left, right, bottom, top
            (x0 - frame["x0"]) * plot_width - half_line,
            (frame["x1"] - x1) * plot_width - half_line,
            (y0 - frame["y0"]) * plot_height - half_line,
            (frame["y1"] - y1) * plot_height - half_line,
        ]
        assert min(white) >= 1, (h, white)


def shown_colour_bars(fig) -> list[tuple[dict, str, float, float]]:
    """Each colour bar a figure shows: its settings, colour scale and the range of values it spans."""
    bars = []
    for trace in traces(fig):
        if trace["type"] == "heatmap" and trace.get("showscale", True):
            bars.append((trace.get("colorbar", {}), trace["colorscale"], trace["zmin"], trace["zmax"]))
        marker = trace.get("marker", {})
        if marker.get("showscale"):
            bars.append((marker.get("colorbar", {}), marker["colorscale"], marker["cmin"], marker["cmax"]))
    return bars


def rgb(colour: str) -> np.ndarray:
    return np.array([float(v) for v in colour[colour.index("(") + 1 : -1].split(",")])


@pytest.mark.parametrize("name", ["pipeline", "all_heads", "zoom", "all_heads_8_bit"])
def test_log_colours_have_a_bar_ticked_at_every_decade_from_end_to_end(run, where, name):
    """The log colour scale was drawn on the map's own bar, linear in p: 1e-4 … 0.1 crowded into its
    first tenth. Its bar now runs over log10 p, a tick at each decade from the floor to 1 spread over
    the whole bar, in the map's own colours; the map keeps its values (hover stays exact)."""
    layer, head = where["layer"], where["head"]
    probs = run.attention(layer).probs.numpy()
    fig = {
        "pipeline": lambda: views.pipeline(run, layer, head, LOG),
        "all_heads": lambda: views.all_heads(run, layer, LOG),
        "zoom": lambda: views.zoom(run, layer, head, views.default_zoom(run), LOG),
        "all_heads_8_bit": lambda: explorer.figures.all_heads_figure(
            run.tokens,
            [encode_probs(p, 16) for p in probs],
            np.arange(len(probs)),
            "8 bits",
            LOG,
        ),
    }[name]()
    softmax = next(
        t for t in traces(fig) if t["type"] == "heatmap" and re.search(r"\bp [=≈]", t["hovertemplate"])
    )
    bars = [bar for bar in shown_colour_bars(fig) if bar[1] != SIGNED_COLORSCALE]
    assert len(bars) == 1, bars
    bar, colours, low, high = bars[0]
    exact = softmax["zmax"] == 1
    decades = list(range(-4 if exact else -2, 1))
    assert bar.get("tickvals") == decades and [low, high] == [decades[0], decades[-1]], (bar, low, high)
    top = ["1e-4", "1e-3", "0.01", "0.1", "1"] if exact else ["1%", "10%", "100%"]
    assert bar["ticktext"] == ["≤" + top[0], *top[1:]]
    for decade in decades:  # the bar's colour at a tick is the map's at that probability
        on_bar = sample_colorscale(colours, (decade - low) / (high - low))[0]
        on_map = sample_colorscale(softmax["colorscale"], 10.0**decade)[0]
        np.testing.assert_allclose(rgb(on_bar), rgb(on_map), atol=1)
