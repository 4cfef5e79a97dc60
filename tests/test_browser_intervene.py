"""The Intervene tab in Chromium: the ablation example's bars against the engine, the ablated run shown
in the other views, a patching sweep drawn and a cell click opening that head on the clean prompt, the
IOI example loading SmolLM2 and sweeping it (its heads ranked by the size of their effect, against a
baseline screenshot), at 1,200 px (against a baseline screenshot) and at 390 px (no overlapping
labels, no sideways scroll)."""

from __future__ import annotations

import numpy as np
import pytest
from browser_support import CONTEXT, JS_OVERLAPS, AppPage, match_baseline, settle
from playwright.sync_api import expect
from test_browser_readable import PHONE

from explorer import views
from explorer.app import examples
from explorer.engine.interventions import Ablation

pytestmark = pytest.mark.browser

PLOTS = ["ablation-plot", "patching-plot"]
COPY_PAIR = examples.PATCHING_EXAMPLES["induction (bundled model)"]
# What a trace of a drawn plot holds: the bars' lengths, or a heatmap's rows, as Plotly computed them.
JS_BARS = """([id, trace]) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    return gd.calcdata[trace].map((bar) => bar.s);
}"""
JS_HEATMAP = """([id, trace]) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    return gd.calcdata[trace][0].z.map((row) => Array.from(row));
}"""
SMOLLM2_TIMEOUT_MS = 300_000


def open_head_by_click(app: AppPage, plot: str, layer: int, head: int, back_to: str) -> None:
    """Hover the cell (layer, head) of `plot`'s heads × layers heatmap, click it where the hover was, and
    wait until the pipeline shows that head: in the Attention tab, opened, with a button back to
    `back_to` (what the button names)."""
    hover = app.hover_cell(plot, 1, layer, head)  # the cell under the mouse is the one clicked
    assert hover[0].startswith(f"layer {layer} · head {head} · kv"), hover
    app.remember_plots()
    app.page.mouse.down()
    app.page.mouse.up()
    app.wait_redrawn(["pipeline-plot"])
    settle(app)
    app.wait_for_tab("Attention")
    assert app.page.locator("#pipeline-plot").is_visible()
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head {head} ")
    assert app.page.locator("#back-to-chart").inner_text() == f"← Back to {back_to}"


def click_example(app: AppPage, examples_id: str, label: str) -> None:
    app.page.locator(f"#{examples_id}").get_by_role("button", name=label, exact=True).click()


def ablation_example(app: AppPage) -> None:
    open_intervene(app)  # the tab's own events landed before the example's (a busy machine delays them)
    app.remember_plots()
    click_example(app, "ablation-examples", examples.ABLATION_LABELS[0])
    app.wait_redrawn(["ablation-plot"])
    settle(app)


def open_intervene(app: AppPage) -> None:
    """Open the tab as a person does: its empty boxes fill from the prompt as it opens, before an
    example is clicked (a fill that landed after the example's would replace its prompts)."""
    app.open_tab("Intervene")
    if app.page.locator("#prompt textarea").input_value().strip():
        expect(app.page.locator("#patch-clean textarea")).not_to_have_value("")


def patching_example(app: AppPage) -> None:
    open_intervene(app)
    app.remember_plots()
    click_example(app, "patching-examples", COPY_PAIR.shows)
    app.wait_redrawn(["patching-plot"])
    settle(app)


def thumbnail(app: AppPage, head: int) -> np.ndarray:
    """Head `head`'s map in the Attention tab's thumbnails, as drawn.  # [N, N]"""
    return np.array(app.page.evaluate(JS_HEATMAP, ["all-heads-plot", head]), dtype=np.float64)


def test_ablating_the_induction_heads_on_the_copy_example_changes_the_bars(app, browser_workspace):
    ablation_example(app)
    (text, heads), ex = examples.ABLATION_EXAMPLES[0], browser_workspace.explorer("")
    assert app.page.locator("#prompt textarea").input_value() == text
    plain, ablated = ex.run(text), ex.run(text, ablate=heads)
    ids = views.ablation_next_token_ids(plain, ablated)
    before, after = (np.array(app.page.evaluate(JS_BARS, ["ablation-plot", t])) for t in (0, 1))
    np.testing.assert_allclose(before, plain.next_token_probs()[ids].numpy(), atol=1e-6)
    np.testing.assert_allclose(after, ablated.next_token_probs()[ids].numpy(), atol=1e-6)
    silver = ids.index(ex.tokenizer.encode(" silver", add_special_tokens=False).ids[0])
    assert silver == 0 and before[silver] > 0.25 and after[silver] < 0.01, (before, after)
    title = app.title("ablation-plot")
    assert title.startswith("Next token before and after the zero ablation of 3.0, 3.1, 3.2")
    assert "logit(“ silver”) − logit(“" in title  # what it did to the two likeliest tokens' difference
    assert not app.problems()


def test_the_ablated_run_shown_in_the_other_views_redraws_the_maps_of_later_layers(app, browser_workspace):
    text = examples.COPY
    app.run(text)
    app.set_layer(1)
    app.pick_head("head 2 · kv 0")
    app.open_tab("Intervene")
    app.page.locator("#ablate-add").click()
    app.page.locator("#ablate-heads").get_by_text("1.2 · kv 0").wait_for()
    app.remember_plots()
    app.page.locator("#ablate-button").click()
    app.wait_redrawn(["ablation-plot"])
    settle(app)
    app.open_tab("Attention")
    app.set_layer(2)
    ex = browser_workspace.explorer("")
    plain = ex.run(text).attention(2).probs.numpy()  # [H, N, N]
    ablated = ex.run(text, ablate=[(1, 2)]).attention(2).probs.numpy()
    assert np.abs(plain[0] - ablated[0]).max() > 1e-3, "ablating 1.2 changes head 2.0's map"
    np.testing.assert_allclose(thumbnail(app, 0), plain[0], atol=1e-6)  # the toggle is off

    app.open_tab("Intervene")
    app.remember_plots()
    app.page.locator("#ablate-in-views input").check()
    app.wait_redrawn(["all-heads-plot"])
    settle(app)
    np.testing.assert_allclose(thumbnail(app, 0), ablated[0], atol=1e-6)
    assert "the other views show the ablated run" in app.status()
    model = browser_workspace.explorer("").config
    assert (browser_workspace.key(""), text, Ablation.parse(model, [(1, 2)], "zero")) in browser_workspace

    app.remember_plots()
    app.page.locator("#ablate-in-views input").uncheck()
    app.wait_redrawn(["all-heads-plot"])
    settle(app)
    np.testing.assert_allclose(thumbnail(app, 0), plain[0], atol=1e-6)
    assert not app.problems()


def test_a_patching_sweep_draws_the_heatmap_and_a_cell_click_opens_that_head(app, browser_workspace):
    app.run("Now is the winter of our discontent")
    patching_example(app)
    ex = browser_workspace.explorer("")
    expected = ex.patch_heads(COPY_PAIR.clean, COPY_PAIR.corrupted, COPY_PAIR.answer, COPY_PAIR.distractor)
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["patching-plot", 0]))
    np.testing.assert_allclose(drawn, expected.recovered.numpy(), atol=1e-5)
    assert app.points("patching-plot") == ex.config.n_layers * ex.config.n_heads
    assert "Patched each of 32 heads" in app.status()

    open_head_by_click(app, "patching-plot", 3, 2, back_to="Intervene")
    assert app.page.locator("#prompt textarea").input_value() == COPY_PAIR.clean
    assert "".join(app.strip_tokens()) == COPY_PAIR.clean.replace("\n", "↵")
    app.page.locator("#back-to-chart").click()
    app.wait_for_tab("Intervene")
    assert not app.page.locator("#back-to-chart").is_visible()
    app.page.wait_for_function(
        "() => { const r = document.querySelector('#patching-plot').getBoundingClientRect();"
        " return r.top < innerHeight && r.bottom > 0; }"
    )
    assert not app.problems()


def test_the_ioi_example_loads_smollm2_and_ranks_its_heads_by_the_size_of_their_effect(app, smollm2_path):
    """The IOI example (docs/models.md's pair) is meant for SmolLM2: picking it loads SmolLM2, then
    sweeps; 23.3 recovers most, and 24.4, which pushes the other way, ranks third with its sign
    (baseline screenshot of the ranking); the ranking names the one token the corruption changes."""
    from explorer.loading import catalog as models

    ioi = examples.PATCHING_EXAMPLES["IOI (SmolLM2)"]
    open_intervene(app)
    app.remember_plots()
    click_example(app, "patching-examples", ioi.shows)
    # loading SmolLM2, running the clean prompt and 270 patches take a while on a busy CPU
    app.wait_redrawn(["patching-plot"], SMOLLM2_TIMEOUT_MS)
    settle(app)
    assert app.page.locator("#model-source input").input_value() == models.SMOLLM2_LABEL
    assert app.points("patching-plot") == 30 * 9 and "Patched each of 270 heads" in app.status()
    name, recovered = app.hover_cell("patching-plot", 1, 23, 3)[:2]  # the head that recovers most (0.584)
    assert name == "layer 23 · head 3 · kv 1" and recovered.startswith("recovered "), (name, recovered)
    assert float(recovered.split()[1]) == pytest.approx(0.584, abs=0.01)
    rows = app.page.locator("#ranked-heads tr.ranked-head")
    ranked = [(row.get_attribute("data-layer"), row.get_attribute("data-head")) for row in rows.all()]
    assert ranked[:4] == [("23", "3"), ("29", "1"), ("24", "4"), ("20", "0")], ranked
    assert rows.nth(2).get_attribute("class") == "ranked-head negative"
    assert float(rows.nth(2).locator("td").nth(2).inner_text()) == pytest.approx(-0.25, abs=0.01)
    said = app.page.locator("#ranked-heads .ranked-corruption").inner_text()
    assert "changes 1 token (position, clean → corrupted): 9 “ John” → “ Mary”" in said, said
    ranking = app.page.locator("#ranked-heads-content")  # the table, not its block: as tall as the map
    match_baseline(app.screenshot(ranking, []), "ranked-heads-smollm2-ioi")
    assert "Loaded in" in app.page.locator("#model-card").inner_text()  # said there, not in a toast
    assert not app.toasts() and not app.script_errors


def test_the_tab_with_an_ablation_and_a_sweep_matches_its_baseline_screenshot(app):
    ablation_example(app)
    patching_example(app)
    panel = app.page.locator("#tab-intervene")
    match_baseline(app.screenshot(panel, []), "view-intervene-drawn")


@pytest.fixture
def phone(browser, app_url):
    context = browser.new_context(**{**CONTEXT, "viewport": PHONE})
    page = context.new_page()
    try:
        yield AppPage(page, app_url).open()
    finally:
        context.close()


def test_at_phone_width_no_labels_overlap_and_the_page_never_scrolls_sideways(phone):
    ablation_example(phone)
    patching_example(phone)
    for plot in PLOTS:
        assert phone.points(plot)
        assert phone.page.evaluate(JS_OVERLAPS, plot) == [], plot
    assert phone.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


NAMES = "When Romeo and Juliet went to the store, Juliet gave a drink to"
SWAPPED = "When Juliet and Romeo went to the store, Romeo gave a drink to"
JS_VALUE = "([id, value]) => document.querySelector(`#${id} textarea, #${id} input`).value === value"


def largest_effect(result, metric: str) -> tuple[int, int]:
    """The head whose patch moves `metric` most, either way."""
    recovered = result.readings[metric].recovered
    return tuple(int(i) for i in np.unravel_index(int(recovered.abs().argmax()), tuple(recovered.shape)))


def box(app: AppPage, elem_id: str):
    return app.page.locator(f"#{elem_id} textarea, #{elem_id} input").first


def test_a_sweep_starts_from_the_prompt_on_screen_reads_any_metric_ranks_heads_and_downloads(
    app, browser_workspace, tmp_path
):
    """The tab opens with the prompt on screen as the clean prompt and its two names swapped; the
    sweep's heads are ranked by the size of their effect beside the map (not on the status line),
    another metric redraws both from the same sweep, the sweep downloads, and a ranked head opens in
    the Attention tab."""
    app.run(NAMES)
    app.open_tab("Intervene")
    for elem_id, value in (
        ("patch-clean", NAMES),
        ("patch-corrupted", SWAPPED),
        ("patch-answer", " Romeo"),
        ("patch-distractor", " Juliet"),
    ):
        app.page.wait_for_function(JS_VALUE, arg=[elem_id, value], timeout=30_000)
    box(app, "patch-corrupted").fill("")
    app.page.locator("#patch-swap").click()  # one click swaps them again
    app.page.wait_for_function(JS_VALUE, arg=["patch-corrupted", SWAPPED], timeout=30_000)

    app.remember_plots()
    app.page.locator("#patch-button").click()
    app.wait_redrawn(["patching-plot"])
    settle(app)
    ex = browser_workspace.explorer("")
    expected = ex.patch_heads(NAMES, SWAPPED, " Romeo", " Juliet")
    rows = app.page.locator("#ranked-heads tr.ranked-head")
    assert rows.count() == views.RANKED_HEADS and "recovered" not in app.status()
    first = (int(rows.first.get_attribute("data-layer")), int(rows.first.get_attribute("data-head")))
    assert first == largest_effect(expected, "logit_diff")

    app.remember_plots()
    app.page.locator("#patch-metric").get_by_label("KL(clean ‖ patched)").check()
    app.wait_redrawn(["patching-plot"])
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["patching-plot", 0]))
    np.testing.assert_allclose(drawn, expected.readings["kl"].recovered.numpy(), atol=1e-4)
    assert "KL" in app.page.locator("#ranked-heads .ranked-title").inner_text()
    top_kl = largest_effect(expected, "kl")
    assert (int(rows.first.get_attribute("data-layer")), int(rows.first.get_attribute("data-head"))) == top_kl

    with app.page.expect_download() as download:
        app.page.locator("#sweep-npz").click()
    path = tmp_path / "sweep.npz"
    download.value.save_as(path)
    saved = np.load(path)
    np.testing.assert_allclose(saved["kl_recovered"], expected.readings["kl"].recovered.numpy(), atol=1e-5)

    app.remember_plots()
    rows.first.click()
    app.wait_redrawn(["pipeline-plot"])
    settle(app)
    app.wait_for_tab("Attention")
    assert app.title("pipeline-plot").startswith(f"Layer {top_kl[0]} · head {top_kl[1]} ")
    assert app.page.locator("#back-to-chart").inner_text() == "← Back to Intervene"
    assert not app.problems()


def test_an_ablation_says_what_it_did_to_the_answers_logit_difference(app):
    app.run(NAMES)
    app.open_tab("Intervene")
    app.page.wait_for_function(JS_VALUE, arg=["patch-answer", " Romeo"], timeout=30_000)
    settle(app)
    app.page.locator("#ablate-add").click()
    app.page.locator("#ablate-heads").get_by_text("0.0 · kv 0").wait_for()
    app.remember_plots()
    app.page.locator("#ablate-button").click()
    app.wait_redrawn(["ablation-plot"])
    title = app.page.locator("#ablation-plot .gtitle").first.text_content()
    assert "logit(“ Romeo”) − logit(“ Juliet”)" in title and "before" in title and "after" in title
    assert not app.problems()
