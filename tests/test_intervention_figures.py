"""The interventions' figures, for the bundled model and its copy example: what they hold checked
against the engine, labels escaped, arrays typed, and tolerant snapshots of their JSON."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import explorer
from explorer import figures, views
from explorer.app import examples, markup
from explorer.engine.interventions import PatchResult
from explorer.engine.patch_metrics import Reading
from explorer.figures.common import to_json, token_label
from explorer.views.interventions import TokenChange, corruption
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


def test_a_sweeps_heads_are_ranked_by_the_size_of_their_effect_with_their_direct_effect(ex, patch):
    example = examples.PATCHING_EXAMPLES["induction (bundled model)"]
    direct = ex.run(example.clean).logit_attribution(example.answer, example.distractor).heads
    for metric in ("logit_diff", "kl"):
        recovered = patch.readings[metric].recovered
        rows = views.ranked_heads(patch, direct, metric)
        assert len(rows) == views.RANKED_HEADS
        assert [abs(r.recovered) for r in rows] == sorted((abs(r.recovered) for r in rows), reverse=True)
        tenth = recovered.abs().flatten().sort(descending=True).values[views.RANKED_HEADS - 1]
        assert abs(rows[-1].recovered) == pytest.approx(float(tenth))
        assert all(r.recovered == pytest.approx(float(recovered[r.layer, r.head])) for r in rows)
        assert all(r.direct == pytest.approx(float(direct[r.layer, r.head])) for r in rows)
    html = markup.ranked_heads(views.ranked_heads(patch, direct, "prob"), "probability <of> the answer")
    assert html.count('class="ranked-head') == views.RANKED_HEADS and "&lt;of&gt;" in html


def sweep_of(
    recovered: list[list[float]], clean_tokens=("a", "b"), corrupted_tokens=("a", "c")
) -> PatchResult:
    """A sweep whose logit difference recovers `recovered` (clean 2, corrupted 0), of two query heads
    a kv head each: what a ranking reads, and nothing it does not."""
    patched = torch.tensor(recovered) * 2.0  # [L, H]
    return PatchResult(
        logit_diff=patched,
        recovered=patched / 2.0,
        clean_logit_diff=2.0,
        corrupted_logit_diff=0.0,
        readings={"logit_diff": Reading(patched, 2.0, 0.0)},
        clean_tokens=list(clean_tokens),
        corrupted_tokens=list(corrupted_tokens),
        answer=" x",
        distractor=" y",
        answer_id=1,
        distractor_id=2,
        first_difference=1,
        kv_head=torch.tensor([0, 1]),
        seconds=0.0,
    )


def test_a_head_that_pushes_against_the_answer_ranks_by_its_size_and_shows_its_sign():
    sweep = sweep_of([[0.1, -0.5], [0.58, 0.2], [float("nan"), 0.0]])  # 1.0 pushes the other way
    direct = torch.tensor([[1.0, -2.0], [3.0, 4.0], [5.0, 6.0]])
    rows = views.ranked_heads(sweep, direct, "logit_diff", k=4)
    assert [(r.layer, r.head) for r in rows] == [(1, 0), (0, 1), (1, 1), (0, 0)]
    assert [r.recovered for r in rows] == pytest.approx([0.58, -0.5, 0.2, 0.1], abs=1e-6)
    assert (rows[1].kv_head, rows[1].direct) == (1, -2.0)
    assert views.ranked_heads(sweep, direct, "logit_diff", k=6)[-1][:2] == (2, 0)  # undefined: last

    html = markup.ranked_heads(rows, "logit difference")
    negative = re.findall(r'<tr class="ranked-head negative" data-layer="(\d+)" data-head="(\d+)"', html)
    assert negative == [("0", "1")] and html.count('class="ranked-head"') == 3
    assert "<td>2</td><td><b>0.1</b> · kv 1</td><td>-0.5</td><td>-2</td>" in html
    assert "<td>+0.58</td>" in html and "either way" in html


def test_the_ranking_says_which_tokens_the_corrupted_prompt_changes_escaped():
    sweep = sweep_of([[0.1, 0.2]], (" When", " <b>Mary</b>", " and", "\n"), (" When", " John", " and", "\t"))
    changes = corruption(sweep)
    assert changes == [(1, " <b>Mary</b>", " John"), (3, "\n", "\t")]
    html = markup.ranked_heads(views.ranked_heads(sweep, torch.zeros(1, 2), "logit_diff"), "x", changes)
    said = "2 tokens (position, clean → corrupted): 1 “ &lt;b&gt;Mary&lt;/b&gt;” → “ John”; 3 “↵” → “⇥”."
    assert said in html and "<b>Mary" not in html
    many = [TokenChange(i, "a", "b") for i in range(markup.CHANGES_LISTED + 3)]
    assert markup.corruption(many).endswith("; 3 more.</div>") and markup.corruption([]) == ""


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
