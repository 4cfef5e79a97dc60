"""Every head's pipeline rides with a layer's update (`payload.pipelines_payload`, each other head's as
`codec.differences` writes it). Each other head's figure, built from its parts against the shown head's,
is the one the server sends for that head, and the update rebuilt as the page rebuilds it gives every
head's figure back, key for key."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer import views
from explorer.app import payload
from explorer.figures import json_text
from tests.codec_fixtures import inflated

SHORT = "To be, or not to be, that is the question"  # exact float32 maps
LONG = " ".join(["Now is the winter of our discontent made glorious summer by this sun of York;"] * 9)
STYLES = {
    "plain": views.MapStyle(),
    "log": views.MapStyle(log=True),
    "weighted": views.MapStyle(weighted=True),
}
LAYER = 1


@pytest.fixture(scope="module")
def bundled():
    return explorer.load(device="cpu")


def name(head: int) -> str:
    return f"layer{LAYER}-head{head}-pipeline"


@pytest.mark.parametrize("style", STYLES, ids=list(STYLES))
@pytest.mark.parametrize("prompt", [SHORT, LONG], ids=["exact", "8-bit"])
def test_another_heads_figure_built_from_its_parts_is_the_one_sent_for_it(bundled, prompt, style):
    run, style = bundled.run(prompt), STYLES[style]
    assert views.pipeline_exact(run) == (prompt == SHORT)
    shown = payload.sent_figure(views.pipeline(run, LAYER, 0, style), name(0))
    for head in range(1, run.config.n_heads):
        parts = views.pipeline_parts(run, LAYER, head, style)
        sent = payload.sent_figure(views.pipeline(run, LAYER, head, style), name(head))
        assert json_text(payload.head_figure(shown, parts, name(head))) == json_text(sent)


def applied(base: dict, difference: dict) -> dict:
    """Head h's figure from the shown head's and h's difference, as the page's `showHead` builds it."""
    data = [difference["data"].get(str(i), trace) for i, trace in enumerate(base["data"])]
    parts = {}
    for part in ("layout", "config"):
        merged = base[part] | difference[part]
        parts[part] = {key: value for key, value in merged.items() if value is not None}
    return {"data": data, **parts}


@pytest.mark.parametrize("prompt", [SHORT, LONG], ids=["exact", "8-bit"])
def test_a_kept_layers_pack_carries_every_heads_figure_and_stays_under_a_megabyte(bundled, prompt):
    run, shown = bundled.run(prompt), 2
    sent = payload.pipeline_payload(run, LAYER, shown, name=name, every_head=True)["plot"]
    assert len(sent.encode()) <= 1 << 20
    plot = json.loads(sent)
    meta = plot["layout"]["meta"]
    heads, head = meta.pop("heads"), meta.pop("head")
    if not meta:
        del plot["layout"]["meta"]
    assert head == shown and heads[shown] is None
    for h in range(run.config.n_heads):
        want = json.loads(payload.plot_payload(views.pipeline(run, LAYER, h), name(h))["plot"])
        assert (plot if h == shown else applied(plot, inflated(heads[h]))) == want


@pytest.fixture(scope="module")
def long_run(tmp_path_factory, tiny_tokenizer):
    """700 tokens on an 8-head llama: past what rides with the layer, its maps pooled (8-bit, 350²)."""
    from tests.conftest import make_hf_checkpoint

    directory = tmp_path_factory.mktemp("llama-1k-context")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", max_position_embeddings=1024)
    run = explorer.load(directory, device="cpu").run("To be, or not to be. " * 300, max_tokens=700)
    assert not payload.heads_fit(run) and payload.others_follow(run)
    return run


@pytest.mark.parametrize("blockwise", [False, True], ids=["whole maps", "block by block"])
@pytest.mark.parametrize("style", ["plain", "weighted"])
def test_a_long_prompts_other_heads_follow_as_differences_from_the_shown_one(
    long_run, style, blockwise, monkeypatch
):
    if blockwise:  # the layer's maps past the views' budget: each head's computed a block at a time
        monkeypatch.setattr("explorer.views.attention.VIEW_MAP_BYTES", 4 << 20)
    assert views.maps_fit(long_run) != blockwise
    style, shown = STYLES[style], 5
    plot = json.loads(payload.pipeline_payload(long_run, LAYER, shown, style, name)["plot"])
    meta = plot["layout"]["meta"]
    others = meta.pop("others")
    if not meta:
        del plot["layout"]["meta"]
    assert "heads" not in meta
    layer, head, fingerprint = payload.asked_heads(long_run, f"{others},1733000000000")
    assert (layer, head) == (LAYER, shown)
    sent = payload.other_heads(long_run, layer, head, fingerprint, style, name)
    assert sent["others"] == others and sent["heads"][shown] is None
    for h in range(long_run.config.n_heads):
        if h != shown:
            want = json.loads(
                payload.plot_payload(views.pipeline(long_run, LAYER, h, style), name(h))["plot"]
            )
            assert applied(plot, inflated(sent["heads"][h])) == want
    other_style = views.MapStyle(log=True)  # the page's figure is not this style's: nothing follows
    assert payload.other_heads(long_run, layer, head, fingerprint, other_style, name) is None


@pytest.mark.parametrize(
    "ask", ["1,2", "1,2,zz", "a,b,0123456789abcdef01234567", "9,0,0123456789abcdef01234567"]
)
def test_a_bad_ask_for_the_other_heads_is_refused_clearly(long_run, ask):
    with pytest.raises(ValueError, match="layer|heads are asked"):
        payload.asked_heads(long_run, ask)
