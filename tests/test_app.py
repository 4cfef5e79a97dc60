"""The app over HTTP, as a browser would use it: launched on 127.0.0.1 and driven with gradio_client."""

from __future__ import annotations

import base64
import csv
import html
import json
import re
import socket
import sys
import types
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from gradio_client import Client

from explorer.cache import Workspace
from explorer.tokens import printable
from explorer.ui import build_demo
from explorer.ui import generate as generate_tab

ROOT = Path(__file__).resolve().parent.parent
N_LAYER_PLOTS = 6  # pipeline, all heads, RoPE rotation, RoPE score split, head similarity, faithfulness


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def workspace(gqa_checkpoint):
    return Workspace(gqa_checkpoint, device="cpu")


@pytest.fixture(scope="module")
def client(workspace):
    demo = build_demo(workspace)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
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
    angles, wavelengths, *layer_plots, overview, next_tokens = plots
    assert all(is_plot(p) for p in (angles, wavelengths, *layer_plots)) and len(layer_plots) == N_LAYER_PLOTS
    assert overview is None and next_tokens is None  # the overview waits until its tab is opened

    _, overview, next_tokens = client.predict(api_name="/overview")
    _, _, _, _, gqa, kv_cache = client.predict("", api_name="/load_model")
    assert all(is_plot(p) for p in (overview, next_tokens, gqa, kv_cache))


def title(plot: dict) -> str:
    return json.loads(plot["plot"])["layout"]["title"]["text"]


def test_layer_and_head_switches_send_new_figures_without_a_forward(client, forwards):
    first = run(client, "Now is the winter of our discontent", 0, 0)
    before = forwards()
    titles = {title(first[6])}
    for layer in (1, 3, 1):
        _, pipeline, *rest = client.predict(layer, 0, 3, 1, api_name="/layer")
        assert len(rest) == N_LAYER_PLOTS - 1 and all(is_plot(p) for p in (pipeline, *rest))
        titles.add(title(pipeline))
    for head in (7, 2):
        _, pipeline, rotation, split = client.predict(1, head, 3, 1, api_name="/head")
        assert all(is_plot(p) for p in (pipeline, rotation, split))
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
def test_an_empty_prompt_is_refused_and_the_views_stay(client, prompt):
    run(client, "Whether 'tis nobler in the mind")
    status, *rest = run(client, prompt)
    assert "The prompt is empty" in status_text(status)
    assert all(is_kept(v) for v in rest)


def test_a_prompt_longer_than_the_context_is_truncated_and_said_so(client, workspace):
    context = workspace.explorer("").config.context_length
    status, strip, *_ = run(client, "to be or not to be " * context)
    assert "truncated to its first" in status_text(status)
    assert f"{context} tokens" in strip and "Truncated" in strip


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
    status, *rest = client.predict("/no/such/model", api_name="/load_model")
    assert "No directory '/no/such/model'" in status_text(status).replace("&#x27;", "'")
    assert all(is_kept(v) for v in rest)
    _, pipeline, *_ = client.predict(1, 2, 0, 0, api_name="/layer")
    assert is_plot(pipeline) and forwards() == before


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
    assert {"run", "layer", "head", "positions", "overview", "generate"} <= on_gpu


def test_readme_front_matter_pins_the_gradio_of_requirements():
    readme = (ROOT / "README.md").read_text()
    pinned = re.search(r"^gradio==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    front = readme.split("---")[1]
    assert readme.startswith("---\n")
    assert "sdk: gradio" in front and f"sdk_version: {pinned}" in front and "app_file: app.py" in front


def test_the_run_cache_drops_the_least_recently_used_run_past_its_byte_budget(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu")
    prompts = ["To be, or not to be", "that is the question", "Whether 'tis nobler in the mind"]
    size = {p: workspace.explorer("").run(p).cache_nbytes() for p in prompts}
    workspace.runs.max_bytes = size[prompts[0]] + size[prompts[2]]  # room for those two, not all three
    workspace.run("", prompts[0])
    workspace.run("", prompts[1])
    workspace.run("", prompts[0])  # the first is now the most recently used
    workspace.run("", prompts[2])
    assert [("", p) in workspace.runs for p in prompts] == [True, False, True]
    assert workspace.runs.nbytes() <= workspace.runs.max_bytes

    forwards = workspace.explorer("").forward_count
    workspace.run("", prompts[1]).attention(1)  # dropped, so it runs again; its eager layer counts too
    assert workspace.explorer("").forward_count == forwards + 1
    assert workspace.runs.nbytes() <= workspace.runs.max_bytes + workspace.run("", prompts[1]).cache_nbytes()


# --- a real model from the picker, and GGUF files that cannot load ---


def test_the_picker_loads_smollm2_and_every_view_draws_a_1000_token_prompt(client, smollm2_path):
    from explorer import models

    session = Client(client.src, verbose=False)  # a session of its own: loading changes its model
    status, *_ = session.predict(models.SMOLLM2_LABEL, api_name="/load_model")
    assert "Loaded SmolLM2-135M-Instruct.Q4_1.gguf" in status_text(status)
    text = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(80))
    status, strip, _, _, *plots = session.predict(text, 29, 8, api_name="/run")
    assert "tokens, one fast forward" in status_text(status) and re.search(r"\b1\d{3} tokens", strip)
    angles, wavelengths, *layer_plots, _, _ = plots
    assert all(is_plot(p) for p in (angles, wavelengths, *layer_plots)) and len(layer_plots) == N_LAYER_PLOTS
    assert "Layer 29 · head 8 · kv 2" in title(layer_plots[0])
    _, overview, next_tokens = session.predict(api_name="/overview")
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
    status, *rest = client.predict(str(path), api_name="/load_model")
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


def test_the_csv_download_is_the_heads_map_with_named_rows_and_columns(client, workspace):
    text = "Now is the winter of our discontent"
    run(client, text, 1, 6)
    _, update = client.predict(1, 6, api_name="/csv")
    assert update["visible"] is True
    with open(update["value"], encoding="utf-8") as file:
        rows = list(csv.reader(file))
    probs = workspace.run("", text).attention(1).head_stages(6)["probs"].numpy()
    tokens = workspace.run("", text).tokens
    assert rows[0][1:] == [f"{i}:{t}" for i, t in enumerate(tokens)]
    np.testing.assert_allclose(np.array([r[1:] for r in rows[1:]], dtype=np.float64), probs, rtol=1e-7)


def test_a_link_names_the_view_and_a_picker_model_by_its_label(smollm2_path):
    from urllib.parse import parse_qs

    from explorer import models
    from explorer.ui import share

    query = share.query_string("Crème brûlée & <b>", 3, 7, str(smollm2_path), "overview")
    assert parse_qs(query[1:]) == {
        "prompt": ["Crème brûlée & <b>"],
        "layer": ["3"],
        "head": ["7"],
        "tab": ["overview"],
        "model": [models.SMOLLM2_LABEL],
    }
    assert "model=" not in share.query_string("x", 0, 0, "", "attention")  # the bundled model is implied


# --- the Generate tab: /generate streams each step, the step slider looks back, Show in every view ---

GENERATE_PROMPT = "To be, or not to be, that is"


def generate(session, prompt: str, layer: int = 0, head: int = 0, max_new_tokens: int = 8, **sampling):
    """Every update /generate streamed, in order: (status, text, rows, candidates, KV cache, step)."""
    settings = dict(temperature=0.0, top_k=0, top_p=1.0, seed=0) | sampling
    job = session.submit(prompt, layer, head, max_new_tokens, *settings.values(), api_name="/generate")
    job.result()
    return job.outputs()


def sent_arrays(plot: dict) -> list[dict]:
    """The figure's traces as sent, typed arrays decoded to numpy."""

    def decode(node):
        if isinstance(node, dict) and "bdata" in node:
            array = np.frombuffer(base64.b64decode(node["bdata"]), dtype=np.dtype(node["dtype"]))
            return array.reshape([int(n) for n in str(node.get("shape", array.size)).split(",")])
        return node

    return [
        {key: decode(value) for key, value in trace.items()} for trace in json.loads(plot["plot"])["data"]
    ]


def plain_status(html_text: str) -> str:
    return html.unescape(status_text(html_text))


def check_step_figures(figures, steps: list, k: int, n_prompt: int, layer: int, head: int) -> None:
    """(rows, candidates, KV cache) as sent after step k: the rows of steps 0..k of that layer and head
    over the sequence so far, step k's candidates, the cache holding positions 0..q of step k."""
    rows, candidates, kv_cache = figures
    z = sent_arrays(rows)[0]["z"]
    assert z.shape == (k + 1, n_prompt + k + 1)  # one row a step, over the sequence so far
    for j in range(k + 1):
        np.testing.assert_allclose(z[j, : steps[j].position + 1], steps[j].attention[layer, head], atol=1e-6)
    assert title(candidates).startswith(f"Step {k}: the candidates after position {steps[k].position}")
    assert sent_arrays(kv_cache)[0]["x"][0] == f"now: {steps[k].position + 1}"


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
    z = sent_arrays(rows)[0]["z"]
    assert z.shape == (3, len(expected.ids))  # the first three steps' rows, over the whole sequence
    np.testing.assert_allclose(z[2, : steps[2].position + 1], steps[2].attention[1, 3], atol=1e-6)
    assert title(candidates).startswith("Step 2: ")
    assert sent_arrays(kv_cache)[0]["x"][0] == f"now: {steps[2].position + 1}"  # as the cache stood then


def test_show_puts_the_generated_sequence_in_every_view_under_a_key_of_its_own(client, workspace, forwards):
    session = Client(client.src, verbose=False)
    generate(session, GENERATE_PROMPT, max_new_tokens=6)
    expected = workspace.explorer("").generate(GENERATE_PROMPT, max_new_tokens=6)
    list(expected)
    before = forwards()
    _, strip, *plots = session.predict(1, 2, api_name="/show_generation")
    assert f"{len(expected.ids)} tokens" in strip
    assert all(is_plot(p) for p in plots[4 : 4 + N_LAYER_PLOTS])
    _, pipeline, *_ = session.predict(3, 2, 0, 0, api_name="/layer")
    _, overview, next_tokens = session.predict(api_name="/overview")
    assert is_plot(pipeline) and is_plot(overview) and is_plot(next_tokens)
    assert forwards() == before, "the generated Run came from the generation, not a forward"
    text = GENERATE_PROMPT + workspace.explorer("").tokenizer.decode(expected.ids[expected.n_prompt :])
    run(session, text)  # typed, the same text is a prompt of its own: one forward of its own
    assert forwards() == before + 1


def test_generate_refuses_a_prompt_it_cannot_continue_and_the_views_stay(client, workspace):
    session = Client(client.src, verbose=False)
    (status, *rest), *more = generate(session, "   ")
    assert "The prompt is empty" in status_text(status) and not more and all(is_kept(v) for v in rest)
    context = workspace.explorer("").config.context_length
    (status, *rest), *more = generate(session, "to be or not to be " * context)
    assert "leave room for at least one new token" in status_text(status) and all(is_kept(v) for v in rest)


def test_the_workspace_keeps_generations_bounded_and_each_with_its_model(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu", max_generation_bytes=1)
    first = workspace.generate("", "To be", max_new_tokens=3)
    assert len(list(workspace.steps(first))) == 3
    second = workspace.generate("", "or not to be", max_new_tokens=3)  # the newest stays; the first goes
    with pytest.raises(ValueError, match="no longer in memory"):
        workspace.cached_run("", first)
    with pytest.raises(ValueError, match="made with another model"):
        workspace.cached_run("/another/model", second)
    list(workspace.steps(second))
    with workspace.generation(second) as generation:
        ids = list(generation.ids)
    assert workspace.cached_run("", second).run.ids == ids and len(ids) == generation.n_prompt + 3
