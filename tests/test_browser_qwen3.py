"""A Qwen3 model in Chromium: the pipeline draws its QK-norm stage beside the maps (screenshot)."""

from __future__ import annotations

import pytest
from browser_support import CONTEXT, AppPage, match_baseline

pytestmark = pytest.mark.browser

PROMPT = "To be, or not to be, that is the question"


def test_a_qwen3_pipeline_draws_its_qk_norm_stage(browser, tmp_path, tiny_tokenizer):
    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from tests.conftest import HF_CONFIGS, make_hf_checkpoint, served

    model_type, overrides = HF_CONFIGS["qwen3-qk-norm"]
    make_hf_checkpoint(tmp_path, tiny_tokenizer, model_type, **overrides)
    with served(Workspace(tmp_path, device="cpu", policy=Policy())) as url:
        context = browser.new_context(**CONTEXT)
        try:
            app = AppPage(context.new_page(), url).open()
            app.run(PROMPT)
            assert app.title("pipeline-plot").split(": ", 1)[1].startswith("QK-norm → RoPE → Q·Kᵀ")
            hover = app.page.evaluate(
                "() => document.querySelector('#pipeline-plot .js-plotly-plot').data"
                ".filter((t) => t.type === 'scatter' && t.name).map((t) => t.name)"
            )
            assert hover == ["‖q‖ projected", "‖q‖ after QK-norm", "‖k‖ projected", "‖k‖ after QK-norm"]
            app.move_mouse_away()
            match_baseline(app.screenshot(app.page.locator("#pipeline-plot"), []), "pipeline-qwen3-qk-norm")
            assert not app.problems()
        finally:
            context.close()
