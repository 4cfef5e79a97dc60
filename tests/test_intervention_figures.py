"""The interventions' figures, for the bundled model and its copy example: what they hold checked
against the engine, labels escaped, arrays typed, and tolerant snapshots of their JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

import explorer
from explorer import figures, views
from explorer.app import examples, markup
from explorer.figures.common import to_json, token_label
from tests.test_figures import assert_valid_as_sent, decoded, snapshot_view, traces
from tests.tolerant_snapshots import TolerantAmberExtension


@pytest.fixture
def snapshot(snapshot):
    return snapshot.use_extension(TolerantAmberExtension)


@pytest.fixture(scope="module")
def ex():
    return explorer.load(device="cpu")


@pytest.fixture(scope="module")
def runs(ex):
    return ex.run(examples.COPY), ex.run(examples.COPY, ablate=examples.INDUCTION_HEADS)


@pytest.fixture(scope="module")
def patch(ex):
    example = examples.PATCHING_EXAMPLES["induction (bundled model)"]
    return ex.patch_heads(example.clean, example.corrupted, example.answer, example.distractor)


@pytest.fixture(scope="module")
def intervention_figures(runs, patch):
    return {"ablation_next_tokens": views.ablation_next_tokens(*runs), "patching": views.patching(patch)}


@pytest.mark.parametrize("name", ["ablation_next_tokens", "patching"])
def test_intervention_figure_matches_its_snapshot(intervention_figures, name, snapshot):
    sent = decoded(intervention_figures[name])
    sent["layout"].pop("template")
    assert snapshot_view(sent) == snapshot


@pytest.mark.parametrize("name", ["ablation_next_tokens", "patching"])
def test_intervention_figure_is_sent_as_plotly_validates_it(intervention_figures, name):
    assert_valid_as_sent(intervention_figures[name])


@pytest.mark.parametrize("name", ["ablation_next_tokens", "patching"])
def test_intervention_arrays_are_typed_not_lists(intervention_figures, name):
    for trace in json.loads(to_json(intervention_figures[name]))["data"]:
        for field in ("z", "x", "y", "customdata"):
            assert not isinstance(trace.get(field), list), field


def test_paired_bars_are_both_runs_probabilities_of_either_runs_top_tokens(ex, runs, intervention_figures):
    plain, ablated = runs
    before_bars, after_bars = traces(intervention_figures["ablation_next_tokens"])
    ids = views.ablation_next_token_ids(plain, ablated)
    np.testing.assert_allclose(before_bars["x"], plain.next_token_probs()[ids].numpy(), rtol=1e-6)
    np.testing.assert_allclose(after_bars["x"], ablated.next_token_probs()[ids].numpy(), rtol=1e-6)
    for run in runs:  # each run's top tokens are all there
        assert set(run.next_token_probs().topk(views.ABLATION_TOP_TOKENS).indices.tolist()) <= set(ids)
    assert len(ids) == len(set(ids)) and before_bars["name"] == "before" and after_bars["name"] == "after"
    labels = decoded(intervention_figures["ablation_next_tokens"])["layout"]["yaxis"]["labelalias"]
    assert labels["0"] == token_label(" silver")  # the plain run's favourite leads
    title = decoded(intervention_figures["ablation_next_tokens"])["layout"]["title"]["text"]
    assert title.startswith("Next token before and after the zero ablation of 3.0, 3.1, 3.2<br>")
    np.testing.assert_allclose(before_bars["customdata"], plain.logits[-1, ids].numpy(), rtol=1e-6)
    np.testing.assert_allclose(after_bars["customdata"], ablated.logits[-1, ids].numpy(), rtol=1e-6)


def test_the_ablation_says_what_it_did_to_a_logit_difference(ex, runs):
    """By default the plain run's two likeliest tokens; or a pair given (the patching answer, distractor)."""
    plain, ablated = runs
    a, b = plain.next_token_probs().topk(2).indices.tolist()
    assert ex.tokenizer.decode([a]) == " silver"

    def said(fig, a, b):
        diffs = [float(run.logits[-1, a] - run.logits[-1, b]) for run in runs]
        return f": {diffs[0]:+.3g} before, {diffs[1]:+.3g} after</sup>"

    title = views.ablation_next_tokens(plain, ablated).figure().layout.title.text
    assert "logit(“ silver”) − logit(“" in title and title.endswith(said(None, a, b))
    golden = ex.tokenizer.encode(" golden", add_special_tokens=False).ids[0]
    title = views.ablation_next_tokens(plain, ablated, (a, golden)).figure().layout.title.text
    assert "logit(“ silver”) − logit(“ golden”)" in title and title.endswith(said(None, a, golden))


def test_bars_refuse_runs_of_different_prompts(ex, runs):
    with pytest.raises(ValueError, match="same prompt"):
        views.ablation_next_tokens(runs[0], ex.run("To be, or not to be", ablate=[(0, 0)])).figure()


def test_patching_heatmap_is_the_recovered_fraction_centred_at_zero(patch, intervention_figures):
    heatmap = traces(intervention_figures["patching"])[0]
    np.testing.assert_allclose(heatmap["z"], patch.recovered.numpy(), rtol=1e-6)
    assert heatmap["zmid"] == 0 and heatmap["zmin"] == -heatmap["zmax"]
    assert heatmap["zmax"] == pytest.approx(float(patch.recovered.abs().max()), rel=1e-6)
    kv, patched = heatmap["customdata"][..., 0], heatmap["customdata"][..., 1]
    np.testing.assert_array_equal(kv, np.broadcast_to(patch.kv_head.numpy(), kv.shape))
    np.testing.assert_allclose(patched, patch.logit_diff.numpy(), rtol=1e-6)
    assert "layer %{y} · head %{x} · kv %{customdata[0]:d}" in heatmap["hovertemplate"]
    title = decoded(intervention_figures["patching"])["layout"]["title"]["text"]
    assert f"clean {patch.clean_logit_diff:.3g}, corrupted {patch.corrupted_logit_diff:.3g}" in title


@pytest.mark.parametrize("metric", ["prob", "kl"])
def test_the_patching_heatmap_of_another_metric_is_that_metrics_recovered_fraction(patch, metric):
    reading = patch.readings[metric]
    sent = decoded(views.patching(patch, metric).figure())
    heatmap = sent["data"][0]
    np.testing.assert_allclose(heatmap["z"], reading.recovered.numpy(), rtol=1e-6)
    np.testing.assert_allclose(heatmap["customdata"][..., 1], reading.patched.numpy(), rtol=1e-6)
    said = {"prob": "p(“ silver”): clean", "kl": "KL(clean ‖ run) of the next token: corrupted"}[metric]
    assert said in sent["layout"]["title"]["text"]
    if metric == "kl":  # 1 − KL(patched) / KL(corrupted): the clean run's own KL is 0
        np.testing.assert_allclose(
            reading.recovered.numpy(), 1 - reading.patched.numpy() / reading.corrupted, atol=1e-6
        )


def test_a_sweeps_heads_are_ranked_by_the_metric_with_their_direct_effect(ex, patch):
    example = examples.PATCHING_EXAMPLES["induction (bundled model)"]
    direct = ex.run(example.clean).logit_attribution(example.answer, example.distractor).heads
    for metric in ("logit_diff", "kl"):
        rows = views.ranked_heads(patch, direct, metric)
        assert [(r.layer, r.head, r.recovered) for r in rows] == patch.top_heads(views.RANKED_HEADS, metric)
        assert all(r.direct == pytest.approx(float(direct[r.layer, r.head])) for r in rows)
    html = markup.ranked_heads(views.ranked_heads(patch, direct, "prob"), "probability <of> the answer")
    assert html.count('class="ranked-head"') == views.RANKED_HEADS and "&lt;of&gt;" in html


def test_a_sweep_downloads_as_npz_and_csv_with_every_metric_and_the_direct_effects(ex, patch, tmp_path):
    import csv

    from explorer.views import sweep_export

    example = examples.PATCHING_EXAMPLES["induction (bundled model)"]
    direct = ex.run(example.clean).logit_attribution(example.answer, example.distractor)
    saved = np.load(sweep_export.write_sweep_npz(patch, direct, tmp_path / "sweep.npz"))
    for metric, reading in patch.readings.items():
        np.testing.assert_array_equal(saved[f"{metric}_recovered"], reading.recovered.numpy())
        np.testing.assert_array_equal(saved[f"{metric}_patched"], reading.patched.numpy())
    np.testing.assert_array_equal(saved["direct_heads"], direct.heads.numpy())
    assert saved["answer_distractor"].tolist() == [example.answer, example.distractor]
    assert saved["clean_tokens"].tolist() == [str(t) for t in patch.clean_tokens]
    with open(sweep_export.write_sweep_csv(patch, direct, tmp_path / "sweep.csv"), encoding="utf-8") as file:
        lines = [row for row in csv.reader(file) if not row[0].startswith("#")]
    header, rows = lines[0], lines[1:]
    assert header[:3] == ["layer", "head", "kv_head"] and header[-1] == "direct_effect"
    assert len(rows) == patch.n_layers * patch.n_heads
    layer, head = 3, 1
    row = dict(zip(header, rows[layer * patch.n_heads + head], strict=True))
    assert float(row["kl_recovered"]) == pytest.approx(float(patch.readings["kl"].recovered[layer, head]))
    assert float(row["direct_effect"]) == pytest.approx(float(direct.heads[layer, head]))
    bound = sweep_export.sweep_bytes(patch)  # what the app's downloads count before writing
    assert max((tmp_path / "sweep.npz").stat().st_size, (tmp_path / "sweep.csv").stat().st_size) <= bound


def test_patching_title_escapes_the_answer_and_distractor():
    zeros, ones, kv_head = np.zeros((2, 4), np.float32), np.ones((2, 4), np.float32), np.array([0, 0, 1, 1])
    fig = figures.patching_figure(zeros, ones, kv_head, 1.0, 0.0, "<b>", " &")
    title = fig.layout.title.text
    assert "“&lt;b&gt;” − “ &amp;”" in title and "<b>" not in title
    assert fig.data[0].zmax == 1.0  # an all-zero sweep still gets a scale
