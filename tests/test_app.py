"""The app over HTTP, as a browser would use it: launched on 127.0.0.1 and driven with gradio_client."""

from __future__ import annotations

import base64
import csv
import html
import json
import re
import socket
import sys
import threading
import types
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from gradio_client import Client

from explorer.app import markup
from explorer.app.kept import GenerationKey, model_nbytes
from explorer.app.policy import REFUSED, Policy
from explorer.app.ui import build_demo
from explorer.app.ui import generate as generate_tab
from explorer.app.workspace import Workspace
from explorer.engine.tokens import printable
from explorer.tools.stress_client import App

ROOT = Path(__file__).resolve().parent.parent
LOADS_UNLIMITED = Policy(loads_per_minute=10_000, server_loads_per_minute=10_000)
# the pipeline (the layer view's value, every head's thumbnails with it), RoPE rotation, RoPE score split,
# head similarity, faithfulness
N_LAYER_PLOTS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def workspace(gqa_checkpoint):
    return Workspace(gqa_checkpoint, device="cpu", policy=LOADS_UNLIMITED)  # tests load often


def serve(workspace):
    demo = build_demo(workspace)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    return demo


@pytest.fixture(scope="module")
def client(workspace):
    demo = serve(workspace)
    try:
        yield Client(demo.local_url, verbose=False)
    finally:
        demo.close()


@pytest.fixture
def forwards(workspace):
    """Fast forwards run so far by the app's model."""
    return lambda: workspace.explorer("").forward_count


def run(client, text: str, layer: int = 0, head: int = 0):
    return client.predict(text, layer, head, api_name="/run")


def is_plot(value) -> bool:
    return isinstance(value, dict) and value.get("type") == "plotly" and json.loads(value["plot"])["data"]


def is_kept(value) -> bool:
    """An output the handler left alone (gr.skip)."""
    return isinstance(value, dict) and value.get("__type__") == "update" and "value" not in value


def status_text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_a_prompt_produces_every_view(client):
    status, strip, _, _, *plots = run(client, "To be, or not to be, that is the question.", 1, 5)
    assert "tokens" in status_text(status) and "token-strip-content" in strip
    angles, wavelengths, *layer_plots, overview, top, next_tokens, q0, q1, k0, k1, zoom, link = plots
    assert link == ""  # a link of an earlier view is taken away
    assert all(is_plot(p) for p in (angles, wavelengths, *layer_plots)) and len(layer_plots) == N_LAYER_PLOTS
    assert overview is None and not top and next_tokens is None  # the overview waits until its tab opens
    assert (q0, k0) == (0, 0) and q1 > 0 and k1 > 0 and is_kept(zoom)  # the zoom's window, drawn once open

    _, overview, top, next_tokens = client.predict(api_name="/overview")
    assert top.count('class="top-head"') >= 5 * 4  # five heads a score (induction: where tokens repeat)
    _, _, _, _, gqa, kv_cache, _ = client.predict("", api_name="/load_model")
    assert all(is_plot(p) for p in (overview, next_tokens, gqa, kv_cache))


def title(plot: dict) -> str:
    return json.loads(plot["plot"])["layout"]["title"]["text"]


def test_layer_and_head_switches_send_new_figures_without_a_forward(client, forwards):
    first = run(client, "Now is the winter of our discontent", 0, 0)
    before = forwards()
    titles = {title(first[6])}
    for layer in (1, 3, 1):
        _, pipeline, *rest, zoom, rows, link = client.predict(layer, 0, 3, 1, api_name="/layer")
        assert link == ""
        sent = [json.loads(p["plot"]) for p in (pipeline, *rest)] + [json.loads(pipeline["thumbnails"])]
        names = [figure["config"]["toImageButtonOptions"]["filename"] for figure in sent]
        assert names[0].endswith(f"-layer{layer}-head0-pipeline") and names[-1].endswith(
            f"-layer{layer}-all-heads"
        )
        assert (pipeline["layer"], pipeline["head"]) == (layer, 0)
        assert len(set(names)) == len(names) and "attention-explorer" not in names
        assert len(rest) == N_LAYER_PLOTS - 1 and all(is_plot(p) for p in (pipeline, *rest))
        assert is_kept(zoom) and is_kept(rows)  # the zoom is closed, and nothing was generated
        titles.add(title(pipeline))
    for head in (7, 2):  # the page switches heads itself; the views that follow the head ask "/head"
        _, pipeline, rotation, split, *layer_plots, zoom, rows, _ = client.predict(
            1, head, 3, 1, api_name="/head"
        )
        assert all(is_plot(p) for p in (rotation, split)) and is_kept(zoom) and is_kept(rows)
        assert (pipeline["layer"], pipeline["head"]) == (1, head)  # an API call: the server drew the head
        assert len(layer_plots) == 2 and all(is_kept(p) for p in layer_plots)  # similarity, faithfulness
        _, pipeline, *_ = client.predict(1, head, 3, 1, api_name="/layer")
        meta = json.loads(pipeline["plot"])["layout"]["meta"]  # the others asked for by this mark
        assert "heads" not in meta and meta["others"].startswith(f"1,{head},")
        titles.add(title(pipeline))
    client.predict(1, 0, 4, 2, api_name="/positions")
    client.predict(api_name="/overview")
    assert forwards() == before
    assert titles == {
        "Layer 0 · head 0 · kv 0: Q·Kᵀ → ×1/√d → causal mask → softmax",
        "Layer 1 · head 0 · kv 0: Q·Kᵀ → ×1/√d → causal mask → softmax",
        "Layer 3 · head 0 · kv 0: Q·Kᵀ → ×1/√d → causal mask → softmax",
        "Layer 1 · head 7 · kv 1: Q·Kᵀ → ×1/√d → causal mask → softmax",
        "Layer 1 · head 2 · kv 0: Q·Kᵀ → ×1/√d → causal mask → softmax",
    }


def test_running_the_same_prompt_again_runs_no_forward(client, forwards):
    run(client, "made glorious summer by this sun of York")
    before = forwards()
    again = run(client, "made glorious summer by this sun of York")
    assert forwards() == before and all(is_kept(v) for v in again)


@pytest.mark.parametrize("prompt", ["", "   \n  "])
def test_an_empty_prompt_clears_the_views_of_the_prompt_before(client, prompt):
    run(client, "Whether 'tis nobler in the mind")
    status, strip, q, k, *plots = run(client, prompt)
    assert "The prompt is empty" in status_text(status) and strip == ""
    assert is_kept(q) and is_kept(k)  # the RoPE positions' sliders stay
    *plots, q0, q1, k0, k1, zoom, link = plots
    assert all(is_kept(v) for v in (q0, q1, k0, k1)) and zoom is None and link == ""
    assert all(p is None or p == "" for p in plots) and len(plots) == 2 + N_LAYER_PLOTS + 3
    status, *rest = run(client, "Whether 'tis nobler in the mind")  # the same prompt again: drawn again
    assert all(is_plot(p) for p in rest[4 : 4 + N_LAYER_PLOTS])


def test_a_prompt_longer_than_the_context_is_truncated_and_said_so(client, workspace):
    context = workspace.explorer("").config.context_length
    status, strip, *_ = run(client, "to be or not to be " * context)
    said = html.unescape(status_text(status))
    assert f"the model's context of {context:,} tokens: the views show its first {context:,} tokens" in said
    assert f"{context} tokens" in strip
    note = re.search(r'<div class="strip-note"[^>]*>(.*?)</div>', strip).group(1)
    assert html.unescape(note) == said  # one true thing, said the same in both places


def test_a_prompt_past_the_apps_limit_names_that_limit_and_the_models_context():
    """SmolLM2's context is 8,192 tokens, the app's limit 2,048: the message names both and counts
    the tokens read past the limit, and the characters never read apart."""
    said = markup.truncation(2048, 2074, 0, context=8192, max_tokens=2048)
    assert said == (
        "The prompt is longer than this app's limit of 2,048 tokens per run (the model's context is "
        "8,192): the views show its first 2,048 tokens. 2,074 more tokens were left out."
    )
    said = markup.truncation(2048, 30_720, 17_232, context=8192, max_tokens=2048)
    assert "30,720 more tokens were left out, and its last 17,232 characters were not read" in said
    assert "cut at 32,768 characters" in said
    assert markup.truncation(100, 0, 0, context=8192, max_tokens=2048) == ""


def test_markup_in_a_prompt_shows_as_literal_text(client):
    _, strip, _, _, _, _, pipeline, *_ = run(client, '<script>alert("x")</script><b>bold</b> & <i>')
    assert "<script" not in strip and "<b>" not in strip and "&lt;" in strip
    labels = json.loads(pipeline["plot"])["layout"]["template"]["layout"]["xaxis"]["labelalias"].values()
    assert not any("<" in label for label in labels) and any("&lt;" in label for label in labels)


@pytest.mark.parametrize("prompt", ["Café ☕ naïve 🙂👍🏽 日本語 «¿Qué?»", "a"])
def test_unicode_emoji_and_a_single_token_run(client, prompt):
    status, strip, *plots = run(client, prompt)
    assert "one fast forward" in status_text(status) and "token-strip-content" in strip
    assert all(is_plot(p) for p in plots[2 : 4 + N_LAYER_PLOTS])


def test_a_model_that_cannot_load_leaves_the_previous_one_in_place(client, forwards):
    run(client, "the slings and arrows")
    before = forwards()
    status, *rest, picker = client.predict("/no/such/model", api_name="/load_model")
    assert "No directory '/no/such/model'" in status_text(status).replace("&#x27;", "'")
    assert all(is_kept(v) for v in rest)
    assert picker["value"] == "Bundled: shakespeare-gqa (2.3M, offline)"  # the picker names what is loaded
    _, pipeline, *_ = client.predict(1, 2, 0, 0, api_name="/layer")
    assert is_plot(pipeline) and forwards() == before


def test_a_load_says_what_loaded_in_how_long_on_the_status_line_and_card_and_raises_no_toast(
    client, monkeypatch
):
    """A toast would cover the page's header, where the picker and the card say what is loaded."""
    toasts = []
    monkeypatch.setattr(gr, "Info", lambda message, *args, **kwargs: toasts.append(message))
    status, card, *_ = client.predict("", api_name="/load_model")
    name, seconds = re.fullmatch(r"Loaded (.+) in (\d+\.\d) s\.", status_text(status)).groups()
    assert f"<b>{name}</b><br>" in card and f'<span class="card-note">Loaded in {seconds} s.</span>' in card
    assert toasts == []


def test_the_default_app_serves_the_bundled_model():
    demo = build_demo()
    card = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "model-card")
    assert isinstance(demo, gr.Blocks) and "shakespeare-gqa" in card.value


def test_on_zerogpu_the_handlers_that_compute_run_inside_spaces_gpu(monkeypatch, workspace):
    spaces = types.ModuleType("spaces")
    spaces.GPU = lambda fn: setattr(fn, "on_gpu", True) or fn
    monkeypatch.setitem(sys.modules, "spaces", spaces)
    demo = build_demo(workspace)
    on_gpu = {f.api_name for f in demo.fns.values() if getattr(f.fn, "on_gpu", False)}
    assert {"run", "layer", "head", "positions", "overview", "ablate", "patch", "generate"} <= on_gpu


def test_readme_front_matter_pins_the_gradio_of_requirements():
    readme = (ROOT / "README.md").read_text()
    pinned = re.search(r"^gradio==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    front = readme.split("---")[1]
    assert readme.startswith("---\n")
    assert "sdk: gradio" in front and f"sdk_version: {pinned}" in front and "app_file: app.py" in front


def test_the_run_cache_drops_the_least_recently_used_run_past_its_byte_budget(gqa_checkpoint):
    prompts = ["To be, or not to be", "that is the question", "Whether 'tis nobler in the mind"]
    probe = Workspace(gqa_checkpoint, device="cpu", max_bytes=1 << 40)
    probe.explorer("")
    sizes = [probe.nbytes()]
    for p in prompts:
        probe.run("", p)
        sizes.append(probe.nbytes())
    model, (first, _, third) = sizes[0], np.diff(sizes)
    workspace = Workspace(gqa_checkpoint, device="cpu", max_bytes=model + first + third)  # not all three
    workspace.run("", prompts[0])
    workspace.run("", prompts[1])
    workspace.run("", prompts[0])  # the first is now the most recently used
    workspace.run("", prompts[2])
    key = workspace.key("")
    assert [(key, p) in workspace for p in prompts] == [True, False, True]
    assert workspace.nbytes() <= workspace.max_bytes

    forwards = workspace.explorer("").forward_count
    workspace.run("", prompts[1]).attention(1)  # dropped, so it runs again; its eager layer counts too
    assert workspace.explorer("").forward_count == forwards + 1
    assert workspace.nbytes() <= workspace.max_bytes + workspace.cached_run("", prompts[1]).nbytes()


# --- a real model from the picker, and GGUF files that cannot load ---


@pytest.mark.slow
def test_the_picker_loads_smollm2_and_every_view_draws_a_1000_token_prompt(client, smollm2_path):
    from explorer.loading import catalog as models

    session = Client(client.src, verbose=False)  # a session of its own: loading changes its model
    status, *_ = session.predict(models.SMOLLM2_LABEL, api_name="/load_model")
    assert "Loaded SmolLM2-135M-Instruct.Q4_1.gguf" in status_text(status)
    text = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(80))
    status, strip, _, _, *plots = session.predict(text, 29, 8, api_name="/run")
    assert "tokens, one fast forward" in status_text(status) and re.search(r"\b1\d{3} tokens", strip)
    angles, wavelengths, *layer_plots = plots[: 2 + N_LAYER_PLOTS]
    assert all(is_plot(p) for p in (angles, wavelengths, *layer_plots)) and len(layer_plots) == N_LAYER_PLOTS
    assert "Layer 29 · head 8 · kv 2" in title(layer_plots[0])
    _, overview, _, next_tokens = session.predict(api_name="/overview")
    assert is_plot(overview) and is_plot(next_tokens)
    _, zoom = session.predict(29, 8, 1000, 1063, 0, 1023, api_name="/zoom")
    assert "queries 1000–1063 × keys 0–1023, exact values" in title(zoom)


@pytest.mark.parametrize("kind", ["truncated", "gemma", "text"])
def test_a_gguf_that_cannot_load_leaves_the_previous_model(client, forwards, tmp_path, kind):
    from gguf import GGUFWriter

    path = tmp_path / f"{kind}.gguf"
    if kind == "text":
        path.write_text("not a model at all\n")
    else:
        writer = GGUFWriter(str(path), "gemma" if kind == "gemma" else "llama")
        writer.add_block_count(2)
        writer.add_tensor("token_embd.weight", np.ones((64, 32), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        if kind == "truncated":
            path.write_bytes(path.read_bytes()[:-512])
    run(client, "the slings and arrows")
    before = forwards()
    status, *rest, _ = client.predict(str(path), api_name="/load_model")
    expected = {"truncated": "is truncated", "gemma": "architecture 'gemma'", "text": "not a GGUF file"}[kind]
    assert expected in status_text(status).replace("&#x27;", "'")
    assert all(is_kept(v) for v in rest)
    _, pipeline, *_ = client.predict(1, 2, 0, 0, api_name="/layer")
    assert is_plot(pipeline) and forwards() == before


def test_the_zoom_shows_exact_values_of_the_window(client, workspace):
    text = "Now is the winter of our discontent made glorious summer by this sun of York"
    run(client, text, 2, 3)
    _, zoom = client.predict(2, 3, 3, 9, 1, 6, api_name="/zoom")
    traces = json.loads(zoom["plot"])["data"]
    stages = workspace.run("", text).attention(2).head_stages(3)
    probs = np.frombuffer(base64.b64decode(traces[1]["z"]["bdata"]), dtype=np.float32).reshape(7, 6)
    np.testing.assert_allclose(probs, stages["probs"][3:10, 1:7].numpy(), atol=1e-7)
    assert (traces[1]["x0"], traces[1]["y0"]) == (1, 3)
    _, zoom = client.predict(2, 3, 10_000, 5, 0, 10_000, api_name="/zoom")  # clamped, put in order
    n = workspace.run("", text).n_tokens
    assert f"queries 5–{n - 1} × keys 0–{n - 1}, exact values" in title(zoom)


# --- limits: what a public app refuses, each with a clear message ---


@pytest.mark.parametrize(
    "args, message",
    [
        ((1, None, 0, 0), "head must be a whole number, got 'None'"),
        ((1.5, 0, 0, 0), "layer must be a whole number, got '1.5'"),
    ],
)
def test_a_bad_layer_head_or_position_from_the_api_is_a_clear_message(client, args, message):
    run(client, "the slings and arrows")
    status, *rest = client.predict(*args, api_name="/layer")
    assert message in status_text(status).replace("&#x27;", "'") and all(is_kept(v) for v in rest)


def test_a_lone_surrogate_and_a_path_too_long_are_clear_messages(client):
    body = '{"data": ["to be \\ud800 or not", 0, 0]}'  # JSON may carry what Python cannot encode
    ok, outputs = App(client.src, timeout=30).call("run", [], body=body)
    assert ok and "lone surrogate (U+D800, character 6)" in status_text(outputs[0])
    status, *_ = client.predict("/" + "a" * 5000, api_name="/load_model")
    assert "at most 1,024 characters; this one has 5,001" in status_text(status)


def test_loads_go_one_at_a_time_and_the_queue_is_bounded(workspace):
    demo = build_demo(workspace)
    load = next(f for f in demo.fns.values() if f.api_name == "load_model")
    assert (load.concurrency_limit, load.concurrency_id) == (1, "load")
    assert demo._queue.max_size == workspace.policy.queue_size == 64


def test_a_full_queue_answers_at_once_that_it_is_full(gqa_checkpoint, monkeypatch):
    """Runs held until the test lets them go: every answer that comes back meanwhile is a full queue's,
    told while the runs ahead of it still wait."""
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(queue_size=1))
    held, slow = threading.Event(), workspace.cached_run
    monkeypatch.setattr(workspace, "cached_run", lambda *a: held.wait(60) and slow(*a))
    demo = serve(workspace)
    apps = [App(demo.local_url, timeout=60, address=f"127.0.0.{2 + i}") for i in range(4)]  # 4 visitors
    try:
        with ThreadPoolExecutor(4) as pool:
            calls = [pool.submit(apps[i].call, "run", [f"To be {i}", 0, 0]) for i in range(4)]
            told, _ = wait(calls, timeout=60, return_when=FIRST_COMPLETED)
            early = [call.result() for call in told]
            held.set()
            answers = [call.result() for call in calls]
    finally:
        held.set()
        demo.close()
    assert early and all(not ok and "Queue is full" in text for ok, text in early)
    full = [text for ok, text in answers if not ok and "Queue is full" in text]
    assert len(full) >= 1 and all(ok for ok, text in answers if "Queue is full" not in text)


def test_under_listed_a_typed_path_is_refused_and_loads_per_address_are_limited(gqa_checkpoint, tmp_path):
    allowed = tuple(str(tmp_path / f"missing-{i}") for i in range(3))
    policy = Policy(models="listed", allowed=allowed, loads_per_minute=2)
    demo = serve(Workspace(gqa_checkpoint, device="cpu", policy=policy))
    try:
        client = Client(demo.local_url, verbose=False)
        for source in (str(gqa_checkpoint), "/root/.ssh", "/no/such/dir"):
            status, *rest, _ = client.predict(source, api_name="/load_model")
            assert status_text(status) == REFUSED["listed"] and all(is_kept(v) for v in rest)
        messages = [status_text(client.predict(source, api_name="/load_model")[0]) for source in allowed]
        assert "could not" not in messages[0] and "loads a minute from one address" in messages[2]
        other = Client(demo.local_url, verbose=False)  # a new session from the same address: no new loads
        assert "loads a minute" in status_text(other.predict(allowed[0], api_name="/load_model")[0])
    finally:
        demo.close()


def test_the_csv_download_is_the_heads_map_with_named_rows_and_columns(client, workspace):
    text = "Now is the winter of our discontent"
    run(client, text, 1, 6)
    _, path = client.predict(1, 6, api_name="/csv")
    with open(path, encoding="utf-8") as file:
        rows = list(csv.reader(file))
    probs = workspace.run("", text).attention(1).head_stages(6)["probs"].numpy()
    tokens = workspace.run("", text).tokens
    assert rows[0][1:] == [f"{i}:{t}" for i, t in enumerate(tokens)]
    np.testing.assert_allclose(np.array([r[1:] for r in rows[1:]], dtype=np.float64), probs, rtol=1e-7)


def test_a_link_names_the_view_and_a_picker_model_by_its_label(smollm2_path):
    from urllib.parse import parse_qs

    from explorer.app.ui import share
    from explorer.loading import catalog as models

    state = share.ViewState.on_page(
        prompt="Crème brûlée & <b>", layer=3, head=7, model=str(smollm2_path), tab="overview"
    )
    query = share.query_string(state)
    assert parse_qs(query[1:]) == {
        "prompt": ["Crème brûlée & <b>"],
        "layer": ["3"],
        "head": ["7"],
        "tab": ["overview"],
        "model": [models.SMOLLM2_LABEL],
    }
    bundled = share.ViewState.on_page(prompt="x", layer=0, head=0, tab="attention")
    assert "model=" not in share.query_string(bundled)  # the bundled model is implied


def test_a_links_lens_target_and_against_come_back_from_the_link_it_wrote(workspace):
    """The lens' "Against" was dropped from links: attribution reopened as a logit, not the difference."""
    from urllib.parse import parse_qsl

    from explorer.app.ui import share

    query = share.query_string(share.ViewState(prompt="To be", tab="lens", target=" be", against=" to"))
    request = types.SimpleNamespace(query_params=dict(parse_qsl(query[1:])), session_hash="s")
    state, named, notes = share.restore_view(workspace, "", request)
    assert (state.prompt, state.target, state.against) == ("To be", " be", " to") and not notes
    assert {"prompt", "target", "against", "tab", "layer", "head"} == named  # the page changes those alone


def test_a_link_read_back_is_the_view_state_it_was_written_from():
    """Every field a link carries comes back as it was, text of any kind included."""
    from explorer.app.ui import circuit, share
    from explorer.views import MapStyle

    odd = "Crème & brûlée #1?\n= <b>\t“x” 🙂 %20+"
    circuit_part = circuit.settings("built-in", "factual", 5, 7, "", "prob", ["exact", "eap"], "last")
    state = share.ViewState(
        prompt=odd,
        model="some/model & #2",
        tab="circuit",
        layer=3,
        head=7,
        style=MapStyle(log=True, weighted=True),
        query=4,
        key=2,
        ablate=("3.1", "0.2"),
        mode="mean",
        in_views=True,
        clean=odd + " clean",
        corrupted="a\r\nb & c",
        answer=" Mary",
        distractor=" John#",
        target=" be&",
        against=" to\n",
        cell=(4, 1),
        circuit=circuit_part,
    )
    assert share.read(share.query_string(state)) == state
    typed = share.ViewState(
        prompt="x", tab="circuit", circuit=circuit.settings("typed", "", 0, 0, odd, "kl", ["exact"])
    )
    assert share.read(share.query_string(typed)) == typed
    assert share.read(share.query_string(share.ViewState(prompt="x"))) == share.ViewState(prompt="x")
    hostile = share.read(f"?prompt=x&layer=abc&cell={'9' * 5000},1&q=-3&mode=drop&views=no")
    assert hostile == share.ViewState(prompt="x")  # what a link names wrongly is read as its default


def test_a_model_installed_after_the_server_started_is_offered_when_a_page_loads(
    workspace, monkeypatch, tmp_path
):
    from explorer.app.jobs import Jobs
    from explorer.app.ui.model_loading import Loader, ModelViews
    from explorer.loading import catalog

    monkeypatch.setattr(catalog, "smollm2_gguf", lambda: None)  # not installed when the server starts
    with gr.Blocks():
        picker = gr.Dropdown([label for label, _ in workspace.policy.choices()])
        views = ModelViews(**{name: gr.State() for name in ModelViews.__dataclass_fields__})
        loader = Loader(workspace, picker, views, gr.State(), Jobs(lambda fraction, text: None))
    assert catalog.SMOLLM2_LABEL not in [label for label, _ in picker.choices]
    monkeypatch.setattr(catalog, "smollm2_gguf", lambda: tmp_path / catalog.SMOLLM2_FILE)  # installed since
    restored = loader.restore("", types.SimpleNamespace(query_params={}, session_hash="s"))
    update, refusal = restored[picker], restored[loader.refusal]
    assert refusal is None
    offered = [choice[0] if isinstance(choice, tuple) else choice for choice in update["choices"]]
    assert offered == [label for label, _ in workspace.policy.choices()] and catalog.SMOLLM2_LABEL in offered


def test_every_tab_a_link_names_is_the_button_the_page_clicks_and_no_events_output(workspace):
    """A link's tab is opened in the page (share.OPEN_TAB_JS clicks #tab-<name>-button); the tabs
    themselves are no event's output (Gradio would copy every component inside them at each status
    message of every event)."""
    from explorer.app.ui import share

    config = build_demo(workspace).get_config_file()
    components = {c["id"]: c for c in config["components"]}
    tab_ids = {c["props"].get("elem_id") for c in components.values() if c["type"] == "tabitem"}
    assert {f"tab-{name}" for name in share.TABS} <= tab_ids
    outputs = {i for dependency in config["dependencies"] for i in dependency["outputs"]}
    assert not [i for i in outputs if components[i]["type"] in ("tabs", "tabitem")]


def test_no_hidden_input_carries_state(workspace):
    """What the page says to the server goes as a component's typed event, and what the server keeps
    for a visitor in a State: no input the page hides (a hidden textbox, number or slider) carries
    either. Hidden are only the panels waiting for their first use, the download buttons the page
    clicks once a file is written, and the Circuit tab's typed pairs until "typed" is the source."""
    config = build_demo(workspace).get_config_file()
    inputs = ("textbox", "number", "slider", "dropdown", "checkbox", "radio", "checkboxgroup")
    hidden = [
        (c["type"], c["props"].get("elem_id"))
        for c in config["components"]
        if c["type"] in inputs
        and (c["props"].get("visible") is False or "hidden-input" in (c["props"].get("elem_classes") or []))
    ]
    assert hidden == [("textbox", "circuit-pairs")]


# --- the Intervene tab: /ablate and /patch ---

INTERVENE_TEXT = "To be, or not to be, that is the question: whether the"
CORRUPTED_TEXT = "To be, or not or be, that is the question: whether the"  # as many tokens


def sent_arrays(plot: dict) -> dict:
    """A plot as sent, its base64 arrays decoded."""

    def decode(node):
        if isinstance(node, dict) and "bdata" in node:
            array = np.frombuffer(base64.b64decode(node["bdata"]), dtype=np.dtype(node["dtype"]))
            return array.reshape([int(s) for s in str(node.get("shape", len(array))).split(",")])
        if isinstance(node, dict):
            return {key: decode(value) for key, value in node.items()}
        return [decode(value) for value in node] if isinstance(node, list) else node

    return decode(json.loads(plot["plot"]))


def test_ablate_draws_both_runs_next_token_probabilities_with_one_forward(client, workspace, forwards):
    from explorer import views
    from explorer.engine.interventions import Ablation

    session = Client(client.src, verbose=False)
    session.predict(INTERVENE_TEXT, 0, 0, api_name="/run")
    before = forwards()
    status, bars = session.predict(["1.3", "2.0 · kv 0", "2, 7"], "mean", False, api_name="/ablate")
    assert "Mean ablation of 1.3, 2.0, 2.7 in the prompt on screen" in status_text(status)
    assert forwards() == before + 1  # the ablated run; the plain one is on screen already
    session.predict(["1.3", "2.0", "2.7"], "mean", False, api_name="/ablate")
    assert forwards() == before + 1, "the ablated run is cached"
    ex = workspace.explorer("")
    ablation = Ablation.parse(ex.config, [(1, 3), (2, 0), (2, 7)], "mean")
    model = workspace.key("")
    assert (model, INTERVENE_TEXT, ablation) in workspace and (model, INTERVENE_TEXT) in workspace

    plain = ex.run(INTERVENE_TEXT)
    ablated = ex.run(INTERVENE_TEXT, ablate=[(1, 3), (2, 0), (2, 7)], ablate_mode="mean")
    ids = views.ablation_next_token_ids(plain, ablated)
    before_bars, after_bars = sent_arrays(bars)["data"]
    np.testing.assert_allclose(before_bars["x"], plain.next_token_probs()[ids].numpy(), atol=1e-6)
    np.testing.assert_allclose(after_bars["x"], ablated.next_token_probs()[ids].numpy(), atol=1e-6)
    assert np.abs(before_bars["x"] - after_bars["x"]).max() > 1e-3, "the ablation changes the bars"


def test_the_ablated_run_shown_in_the_views_is_what_switches_and_the_zoom_read(client, workspace):
    session = Client(client.src, verbose=False)
    session.predict(INTERVENE_TEXT, 0, 0, api_name="/run")
    ex, n = workspace.explorer(""), workspace.run("", INTERVENE_TEXT).n_tokens
    plain = ex.run(INTERVENE_TEXT).attention(2).head_stages(5)["probs"].numpy()
    ablated = ex.run(INTERVENE_TEXT, ablate=[(1, 1), (1, 6)]).attention(2).head_stages(5)["probs"].numpy()
    assert np.abs(plain - ablated).max() > 1e-3, "ablating layer 1 changes the maps of layer 2"

    def zoomed() -> np.ndarray:
        _, pipeline, *_ = session.predict(2, 5, 0, 0, api_name="/layer")  # a switch reads the run shown
        assert title(pipeline).startswith("Layer 2 · head 5 ")
        _, zoom = session.predict(2, 5, 0, n - 1, 0, n - 1, api_name="/zoom")
        return np.frombuffer(base64.b64decode(json.loads(zoom["plot"])["data"][1]["z"]["bdata"]), np.float32)

    status, _ = session.predict(["1.1", "1.6"], "zero", True, api_name="/ablate")
    assert "the other views show the ablated run" in status_text(status)
    np.testing.assert_allclose(zoomed().reshape(n, n), ablated, atol=1e-7)
    _, _, *plots = session.predict(INTERVENE_TEXT, 2, 5, api_name="/run")  # Run shows the plain run again
    assert all(is_plot(p) for p in plots[2 : 2 + N_LAYER_PLOTS])
    np.testing.assert_allclose(zoomed().reshape(n, n), plain, atol=1e-7)
    session.predict(["1.1", "1.6"], "zero", True, api_name="/ablate")
    status, _ = session.predict(["1.1", "1.6"], "zero", False, api_name="/ablate")
    assert "the other views show the plain run" in status_text(status)
    np.testing.assert_allclose(zoomed().reshape(n, n), plain, atol=1e-7)


@pytest.mark.parametrize(
    ("heads", "message"),
    [
        ([], "Pick at least one head to ablate"),
        (["3.x"], "“3.x” is not a head: write layer.head"),
        (["4.0"], "layer 4 of ablated head (4, 0) is out of range: this model has layers 0 to 3"),
        (["0.8"], "head 8 of ablated head (0, 8) is out of range: this model has heads 0 to 7"),
    ],
)
def test_ablating_no_head_or_a_head_not_in_the_model_is_refused_and_the_bars_stay(client, heads, message):
    session = Client(client.src, verbose=False)
    session.predict(INTERVENE_TEXT, 0, 0, api_name="/run")
    status, bars = session.predict(heads, "zero", False, api_name="/ablate")
    assert message in status_text(status) and is_kept(bars)


def test_patch_draws_the_recovered_fraction_of_every_head_as_the_engine_computes_it(client, workspace):
    status, heatmap, direct, ranked = client.predict(
        INTERVENE_TEXT, CORRUPTED_TEXT, " to", " be", api_name="/patch"
    )
    ex = workspace.explorer("")
    expected = ex.patch_heads(INTERVENE_TEXT, CORRUPTED_TEXT, " to", " be")
    (trace,) = sent_arrays(heatmap)["data"]
    np.testing.assert_allclose(trace["z"], expected.recovered.numpy(), atol=1e-5)
    assert trace["z"].shape == (ex.config.n_layers, ex.config.n_heads) and trace["zmid"] == 0
    assert "Patched each of 32 heads in" in status_text(status) and "recovered" not in status_text(status)
    a = workspace.run("", INTERVENE_TEXT).logit_attribution(" to", " be")
    rows = re.findall(r'data-layer="(\d+)" data-head="(\d+)".*?<td>([^<]+)</td><td>([^<]+)</td></tr>', ranked)
    assert len(rows) == 10  # the ten that move the logit difference most either way, beside the map
    each = expected.recovered.flatten().tolist()
    largest = sorted(range(len(each)), key=lambda i: -abs(each[i]))[:10]
    n_heads = ex.config.n_heads
    for (layer, head, recovered, direct_effect), (l, h, value) in zip(
        rows, [(i // n_heads, i % n_heads, each[i]) for i in largest], strict=True
    ):
        assert (int(layer), int(head)) == (l, h) and float(recovered) == pytest.approx(value, abs=1e-3)
        assert float(direct_effect) == pytest.approx(float(a.heads[l, h]), abs=1e-3)
    direct_heads = sent_arrays(direct)["data"][0]  # the direct effect beside the total
    np.testing.assert_allclose(direct_heads["z"], a.heads.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    ("corrupted", "answer", "message"),
    [
        (CORRUPTED_TEXT + " again", " to", "must have the same number of tokens"),
        (CORRUPTED_TEXT, " question", "The answer “ question” is 6 tokens"),
        (INTERVENE_TEXT, " to", "The clean and corrupted prompts are the same tokens"),
    ],
)
def test_a_patch_that_cannot_be_made_says_why_and_the_heatmap_stays(client, corrupted, answer, message):
    status, heatmap, direct, ranked = client.predict(
        INTERVENE_TEXT, corrupted, answer, " be", api_name="/patch"
    )
    assert message in status_text(status).replace("&quot;", '"') and is_kept(heatmap) and is_kept(direct)
    assert is_kept(ranked)


# --- the Generate tab: /generate streams each step, the step slider looks back, Show in every view ---

GENERATE_PROMPT = "To be, or not to be, that is"


def generate(session, prompt: str, layer: int = 0, head: int = 0, max_new_tokens: int = 8, **sampling):
    """Every update /generate streamed, in order: (status, text, rows, candidates, KV cache, step)."""
    settings = dict(temperature=0.0, top_k=0, top_p=1.0, seed=0) | sampling
    job = session.submit(prompt, layer, head, max_new_tokens, *settings.values(), api_name="/generate")
    job.result()
    return job.outputs()


def sent_traces(plot: dict) -> list[dict]:
    """The figure's traces as sent, typed arrays decoded to numpy."""
    return sent_arrays(plot)["data"]


def plain_status(html_text: str) -> str:
    return html.unescape(status_text(html_text))


def check_step_figures(figures, steps: list, k: int, n_prompt: int, layer: int, head: int) -> None:
    """(rows, candidates, KV cache) as sent after step k: the rows of steps 0..k of that layer and head
    over the sequence so far, step k's candidates, the cache holding positions 0..q of step k."""
    rows, candidates, kv_cache = figures
    z = sent_traces(rows)[0]["z"]
    assert z.shape == (k + 1, n_prompt + k + 1)  # one row a step, over the sequence so far
    for j in range(k + 1):
        np.testing.assert_allclose(z[j, : steps[j].position + 1], steps[j].attention[layer, head], atol=1e-6)
    assert title(candidates).startswith(f"Step {k}: the candidates after position {steps[k].position}")
    assert sent_traces(kv_cache)[0]["x"][0] == f"now: {steps[k].position + 1}"


def test_generate_streams_each_greedy_step_as_ex_generate_takes_it(client, workspace, monkeypatch):
    monkeypatch.setattr(generate_tab, "FIGURE_INTERVAL_S", 0.0)  # figures with every step
    session = Client(client.src, verbose=False)
    *streamed, last = generate(session, GENERATE_PROMPT, layer=2, head=5, max_new_tokens=8)
    ex = workspace.explorer("")
    expected = ex.generate(GENERATE_PROMPT, max_new_tokens=8)
    steps = list(expected)
    n_prompt = expected.n_prompt
    assert len(streamed) == len(steps) and steps
    for k, (status, text, *figures, step) in enumerate(streamed):
        assert plain_status(status).startswith(f"Step {k}: “{printable(steps[k].token)}”")
        assert text == ex.tokenizer.decode(
            expected.ids[n_prompt : n_prompt + k + 1], skip_special_tokens=False
        )
        check_step_figures(figures, steps, k, n_prompt, 2, 5)
        assert step["value"] == k
    reason = {"eos": "end-of-sequence", "max_new_tokens": "the most new tokens asked for"}[
        expected.stop_reason
    ]
    assert plain_status(last[0]).startswith(f"{len(steps)} new token") and reason in plain_status(last[0])
    assert last[1] == text and all(is_kept(v) for v in last[2:5])  # the last step's figures went with it
    assert last[5]["value"] == len(steps) - 1


def test_generate_sends_figures_at_most_every_interval_and_the_last_steps_at_the_end(
    client, workspace, monkeypatch
):
    monkeypatch.setattr(generate_tab, "FIGURE_INTERVAL_S", 3600.0)
    session = Client(client.src, verbose=False)
    first, *middle, last = generate(session, GENERATE_PROMPT, layer=1, head=6, max_new_tokens=8)
    expected = workspace.explorer("").generate(GENERATE_PROMPT, max_new_tokens=8)
    steps = list(expected)
    check_step_figures(first[2:5], steps, 0, expected.n_prompt, 1, 6)
    assert len(middle) == len(steps) - 1 and all(is_kept(v) for update in middle for v in update[2:5])
    new_ids = expected.ids[expected.n_prompt :]
    decode = workspace.explorer("").tokenizer.decode
    texts = [decode(new_ids[: k + 1], skip_special_tokens=False) for k in range(len(steps))]
    assert [first[1]] + [update[1] for update in middle] == texts  # the text came with every step
    check_step_figures(last[2:5], steps, len(steps) - 1, expected.n_prompt, 1, 6)


def test_the_step_slider_looks_back_without_running_the_model(client, workspace):
    session = Client(client.src, verbose=False)
    generate(session, GENERATE_PROMPT, layer=1, head=3, max_new_tokens=6)
    ex = workspace.explorer("")
    expected = ex.generate(GENERATE_PROMPT, max_new_tokens=6)
    steps = list(expected)
    assert len(steps) > 2, "the tiny model ends no earlier than step 2 on this prompt"
    embeds = []
    hook = ex.model.embed_tokens.register_forward_hook(lambda *_: embeds.append(1))
    try:
        _, rows, candidates, kv_cache = session.predict(2, 1, 3, api_name="/generation_step")
    finally:
        hook.remove()
    assert not embeds, "looking back ran the model"
    z = sent_traces(rows)[0]["z"]
    assert z.shape == (3, len(expected.ids))  # the first three steps' rows, over the whole sequence
    np.testing.assert_allclose(z[2, : steps[2].position + 1], steps[2].attention[1, 3], atol=1e-6)
    assert title(candidates).startswith("Step 2: ")
    assert sent_traces(kv_cache)[0]["x"][0] == f"now: {steps[2].position + 1}"  # as the cache stood then


def test_show_puts_the_generated_sequence_in_every_view_under_a_key_of_its_own(client, workspace, forwards):
    session = Client(client.src, verbose=False)
    generate(session, GENERATE_PROMPT, max_new_tokens=6)
    expected = workspace.explorer("").generate(GENERATE_PROMPT, max_new_tokens=6)
    list(expected)
    before = forwards()
    _, strip, *plots = session.predict(1, 2, api_name="/show_generation")
    # the generated Run is the generation's: its last token fed as a step feeds one (a forward of one
    # position, counted as one), never a forward of the whole sequence
    assert forwards() == before + 1, "the generated Run came from the generation, not a forward"
    assert f"{len(expected.ids)} tokens" in strip
    assert all(is_plot(p) for p in plots[4 : 4 + N_LAYER_PLOTS])
    _, pipeline, *_ = session.predict(3, 2, 0, 0, api_name="/layer")
    _, overview, _, next_tokens = session.predict(api_name="/overview")
    assert is_plot(pipeline) and is_plot(overview) and is_plot(next_tokens)
    shown = forwards()
    text = GENERATE_PROMPT + workspace.explorer("").tokenizer.decode(expected.ids[expected.n_prompt :])
    run(session, text)  # typed, the same text is a prompt of its own: one forward of its own
    assert forwards() == shown + 1


def test_generate_refuses_a_prompt_it_cannot_continue_and_the_views_stay(client, workspace):
    session = Client(client.src, verbose=False)
    (status, *rest), *more = generate(session, "   ")
    assert "The prompt is empty" in status_text(status) and not more and all(is_kept(v) for v in rest)
    context = workspace.explorer("").config.context_length
    (status, *rest), *more = generate(session, "to be or not to be " * context)
    assert "leave room for at least one new token" in status_text(status) and all(is_kept(v) for v in rest)


def test_the_workspace_keeps_generations_bounded_and_each_with_its_model(gqa_checkpoint):
    model = model_nbytes(Workspace(gqa_checkpoint, device="cpu").explorer(""))
    workspace = Workspace(gqa_checkpoint, device="cpu", max_bytes=model + 1024)  # what is in hand stays
    first = workspace.generate("", "To be", max_new_tokens=3)
    assert len(list(workspace.steps(first))) == 3
    second = workspace.generate("", "or not to be", max_new_tokens=3)  # the newest stays; the first goes
    assert first not in workspace and second in workspace and workspace.key("") in workspace
    with pytest.raises(ValueError, match="no longer in memory"):
        workspace.cached_run("", first)
    with pytest.raises(ValueError, match="made with another model"):
        workspace.cached_run("", GenerationKey("/another/model", second.serial))
    list(workspace.steps(second))
    with workspace.generation(second) as generation:
        ids = list(generation.ids)
    assert workspace.cached_run("", second).run.ids == ids and len(ids) == generation.n_prompt + 3


def test_an_example_that_swaps_the_model_says_so_beside_it():
    """Each Intervene example's label names the model it loads, and a line beside the examples says
    that picking one loads it (not a toast after the click)."""
    from explorer.app import examples

    labels = [*examples.ABLATION_LABELS, *(e.shows for e in examples.PATCHING_EXAMPLES.values())]
    assert all(" · loads " in label for label in labels)
    demo = build_demo(Workspace(device="cpu"))
    said = [b.value for b in demo.blocks.values() if isinstance(b, gr.Markdown)]
    assert said.count(examples.SWAPS_MODEL) == 2  # beside the ablation and the patching examples


def test_the_jargon_is_explained_where_it_first_appears():
    demo = build_demo(Workspace(device="cpu"))
    blocks = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    intro, key = blocks["intro"].value, blocks["pipeline-key"].value
    for term in ("SDPA", "eager"):
        assert f'<abbr title="{html.escape(markup.GLOSSARY[term])}">{term}</abbr>' in intro
    assert f'<abbr title="{html.escape(markup.GLOSSARY["hatched"])}">Hatched</abbr>' in key
    assert blocks["head-picker"].info.startswith("kv: the key/value head a query head reads")
