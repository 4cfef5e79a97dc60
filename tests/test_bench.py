"""The benchmark runs end to end (`--quick`, on a tiny model) so it cannot rot. No time is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.tools.bench.patching import PAIRS
from explorer.tools.bench.report import CONTENDERS, RATIOS, TARGETS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    command = [sys.executable, "-m", "explorer.bench", "--quick", "--shape", "tiny", f"--out={out}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "results-cpu.json").read_text()), (out / "results-cpu.md").read_text()


def test_quick_bench_measures_every_contender_in_its_own_process(quick_results):
    results, _ = quick_results
    rows = results["rows"]
    assert [(row["n_tokens"], row["contender"]) for row in rows] == [(512, c) for c in CONTENDERS]
    for row in rows:
        if row["contender"] == "tl" and row["status"] == "unavailable":
            assert "transformer-lens" in row["reason"]  # optional peer: says why it is missing
            continue
        assert row["status"] == "ok", row
        assert len(row["all_seconds"]) == results["setup"]["repeats"] == 2
        assert row["seconds"] > 0 and row["peak_extra_bytes"] >= 0


def test_every_contender_predicts_the_same_next_token(quick_results):
    results, _ = quick_results
    predicted = {row["next_token"] for row in results["rows"] if row["status"] == "ok"}
    assert len(predicted) == 1  # one checkpoint, loaded by every contender


def test_ratios_and_targets_are_reported_for_the_lengths_run(quick_results):
    results, markdown = quick_results
    assert set(results["ratios"]) == {"512"}
    assert set(results["ratios"]["512"]) == set(RATIOS)
    assert results["ratios"]["512"]["a/d"] > 0
    assert [t["ratio"] for t in results["targets"]] == [name for name, *_ in TARGETS]
    assert {t["met"] for t in results["targets"][1:]} == {None}  # N = 1024, 2048 not run by --quick
    assert results["machine"]["device"] == "cpu" and results["machine"]["torch_threads"] >= 1
    for heading in [*(h for _, h in CONTENDERS.values()), *RATIOS]:
        assert heading in markdown


def test_app_update_bytes_are_reported_per_view_or_say_why_not(quick_results):
    results, markdown = quick_results
    app = results["app_update_bytes"]
    if app["status"] != "ok":
        assert app["reason"] in markdown
        return
    assert set(app["bytes"]) == {"512", "1024"}
    for views in app["bytes"].values():
        assert views["pipeline view"] > 0 and views["all-heads view"] > 0


def test_patching_sweep_is_timed_against_one_forward_per_head(quick_results):
    results, markdown = quick_results
    patching = results["patching"]
    assert patching["status"] == "ok" and (patching["layers"], patching["heads"]) == (3, 4)
    assert [row["pair"] for row in patching["rows"]] == list(PAIRS)
    for row in patching["rows"]:
        assert len(row["all_sweep_seconds"]) == len(row["all_forward_seconds"]) == 2
        per_head = patching["layers"] * patching["heads"] * row["forward_seconds"]
        assert row["ratio"] == pytest.approx(row["sweep_seconds"] / per_head)
    assert [row["differ_at"] for row in patching["rows"]] == [13, 10, 0]
    assert "Head-patching sweep" in markdown and "sweep / (L·H × forward)" in markdown


def test_the_real_smollm2_gguf_runs_every_contender_on_the_same_english_tokens(smollm2_path, tmp_path):
    """`--model smollm2-gguf`: the contenders read the same GGUF file and predict the same token (ours
    alone here; the full run adds transformers and TransformerLens, which take 40 s to load the file)."""
    command = [sys.executable, "-m", "explorer.bench", "--model", "smollm2-gguf", "--lengths", "64"]
    command += ["--contenders", "first_view", "switch", "--warmups", "0", "--repeats", "1"]
    command += [f"--out={tmp_path}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results-cpu-smollm2-gguf.json").read_text())
    ok = [row for row in results["rows"] if row["status"] == "ok"]
    assert {row["contender"] for row in ok} == {"first_view", "switch"}  # transformers' GGUF load: 40 s
    assert len({row["next_token"] for row in ok}) == 1
    assert (
        "SmolLM2-135M-Instruct.Q4_1.gguf (real weights"
        in (tmp_path / "results-cpu-smollm2-gguf.md").read_text()
    )


def test_the_browser_bench_counts_the_bytes_a_handler_returns_by_component():
    import gradio as gr
    from gradio.components.plot import PlotData

    from explorer.app.ui.layer_view import layer_value
    from explorer.tools.bench.browser import payload_bytes

    figure = PlotData(type="plotly", plot='{"data": []}')
    plot_data = {"type": "plotly", "plot": '{"data": [1]}'}
    view = layer_value(plot_data, layer=2, head=1, n_layers=3, view="v", thumbnails='{"data": []}')
    with gr.Blocks():
        plot, box, layer_view = gr.Plot(), gr.Textbox(), gr.Textbox()
    returned = {plot: figure, box: gr.update(visible=False), layer_view: view}
    assert payload_bytes(returned) == len(figure.plot) + len(json.dumps(view))
    assert payload_bytes((figure, "<p>é</p>", gr.update(value="ab"))) == len(figure.plot) + 9 + 2
