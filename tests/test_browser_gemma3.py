"""A Gemma 3 model in Chromium: a sliding layer's pipeline draws its banded mask, the keys outside
its window hatched and given no weight (for a head the page switches to as well), beside a full
layer's causal one (screenshot)."""

from __future__ import annotations

import pytest
from browser_support import CONTEXT, AppPage, match_baseline

pytestmark = pytest.mark.browser

PROMPT = "To be, or not to be, that is the question"
SOFTMAX_PANEL = 5


def test_a_gemma3_sliding_layer_draws_its_window(browser, tmp_path, tiny_tokenizer):
    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from tests.conftest import HF_CONFIGS, make_hf_checkpoint, served

    model_type, overrides = HF_CONFIGS["gemma3-sliding"]  # layers: sliding, full, sliding; window 5
    make_hf_checkpoint(tmp_path, tiny_tokenizer, model_type, **overrides)
    workspace = Workspace(tmp_path, device="cpu", policy=Policy())
    with served(workspace) as url:
        context = browser.new_context(**CONTEXT)
        try:
            app = AppPage(context.new_page(), url).open()
            app.run(PROMPT)
            assert "→ sliding-window mask (5 keys) →" in app.title("pipeline-plot")
            last = workspace.run("", PROMPT).n_tokens - 1
            assert last >= 10
            hatched = app.page.evaluate(
                "() => document.querySelector('#pipeline-plot .js-plotly-plot').data"
                ".filter((t) => t.type === 'scatter' && t.fill === 'toself').map((t) => t.text)"
            )
            assert sum("outside this sliding layer's window" in text for text in hatched) == 2
            outside = app.hover_cell("pipeline-plot", SOFTMAX_PANEL, last, 0)  # far before the window
            inside = app.hover_cell("pipeline-plot", SOFTMAX_PANEL, last, last - 4)  # its oldest key
            assert outside[-1].split()[-1] in ("0", "0.000", "0.0000"), outside
            assert inside[-1].split()[-1] not in ("0", "0.000", "0.0000"), inside
            app.move_mouse_away()
            match_baseline(app.screenshot(app.page.locator("#pipeline-plot"), []), "pipeline-gemma3-sliding")
            app.pick_head("head 6 · kv 1")  # drawn in the page from the layer's update: the band is kept
            assert app.title("pipeline-plot").startswith("Layer 0 (sliding, 5 keys) · head 6 · kv 1: ")
            outside = app.hover_cell("pipeline-plot", SOFTMAX_PANEL, last, 0)
            assert outside[-1].split()[-1] in ("0", "0.000", "0.0000"), outside
            app.set_layer(1)
            assert "→ causal mask →" in app.title("pipeline-plot")
            assert not app.problems()
        finally:
            context.close()
