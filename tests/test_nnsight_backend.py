"""The nnsight backend (`explorer.load(..., backend="nnsight")`): a Hugging Face model run through
nnsight's tracing, here in this process. Its logits and every layer's maps are held against
transformers' eager path, its lens, attribution and patching against our own engine on the same
checkpoint; every forward is counted as a trace. NDIF itself cannot be reached from the tests: its
path is run through nnsight's local simulation of a remote request (`remote="local"`)."""

from __future__ import annotations

import pytest
import torch

import explorer
from explorer.engine.taps import Taps
from explorer.errors import CheckpointError, LimitError
from explorer.explorer import Explorer
from tests.conftest import HF_CONFIGS, PROMPT, TEXT, logits_tolerance, make_hf_checkpoint, maps_tolerance

pytest.importorskip("nnsight")

CLEAN = "To be, or not to be, that is the question: whether the"
CORRUPTED = "To be, or not or be, that is the question: whether the"
ANSWER, DISTRACTOR = " to", " be"
NODES = [("z", 1, 2, -1), ("resid", 1, -1), ("q", 0, 1, None), ("k", 2, 1, -2), ("mlp", 0, -1)]


def kept_in(values: list):
    """A tap that keeps what passes in `values`."""
    return lambda layer, value: values.append(value.clone())


@pytest.fixture(scope="module", params=["llama-untied", "qwen3-qk-norm", "gemma3-sliding"])
def trio(request, tmp_path_factory, tiny_tokenizer):
    """transformers' model (eager), our engine and the nnsight backend, on one random-init checkpoint:
    a Llama with GQA, a Qwen3 (QK-norm), a Gemma 3 (sliding layers, norms after attention and MLP)."""
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    traced = explorer.load(directory, device="cpu", backend="nnsight")
    return hf_model, explorer.load(directory, device="cpu"), traced


def test_logits_and_every_layers_maps_equal_transformers_eager(trio):
    hf_model, _, traced = trio
    run = traced.run(PROMPT)
    with torch.no_grad():
        expected = hf_model(torch.tensor([run.ids]), output_attentions=True)
    assert (run.logits - expected.logits[0]).abs().max().item() <= logits_tolerance(expected.logits)
    for layer in range(traced.config.n_layers):
        att = run.attention(layer)
        assert (att.probs - expected.attentions[layer][0]).abs().max().item() <= maps_tolerance(att)


@pytest.mark.parametrize("family", ["mistral", "qwen2-bias"])
def test_mistral_and_qwen2_logits_and_maps_equal_transformers_eager(family, tmp_path, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS[family]
    hf_model = make_hf_checkpoint(tmp_path, tiny_tokenizer, model_type, **overrides)
    run = explorer.load(tmp_path, device="cpu", backend="nnsight").run(PROMPT)
    with torch.no_grad():
        expected = hf_model(torch.tensor([run.ids]), output_attentions=True)
    assert (run.logits - expected.logits[0]).abs().max().item() <= logits_tolerance(expected.logits)
    for layer, hf_maps in enumerate(expected.attentions):
        att = run.attention(layer)
        assert (att.probs - hf_maps[0]).abs().max().item() <= maps_tolerance(att)


def test_the_lens_attribution_and_patching_equal_our_engine(trio):
    _, ours, traced = trio
    mine, theirs = ours.run(TEXT[:90]), traced.run(TEXT[:90])
    lens, traced_lens = mine.logit_lens(), theirs.logit_lens()
    assert (lens.kl_to_final - traced_lens.kl_to_final).abs().max().item() <= 1e-4
    assert (lens.top_probs - traced_lens.top_probs).abs().max().item() <= 1e-4
    attribution, traced_attribution = (
        mine.logit_attribution(ANSWER, DISTRACTOR),
        theirs.logit_attribution(ANSWER, DISTRACTOR),
    )
    assert (attribution.heads - traced_attribution.heads).abs().max().item() <= 1e-4
    assert (attribution.mlps - traced_attribution.mlps).abs().max().item() <= 1e-4
    patched = ours.patch_heads(CLEAN, CORRUPTED, ANSWER, DISTRACTOR)
    traced_patched = traced.patch_heads(CLEAN, CORRUPTED, ANSWER, DISTRACTOR)
    difference = torch.as_tensor(patched.logit_diff) - torch.as_tensor(traced_patched.logit_diff)
    assert difference.abs().max().item() <= 1e-4
    nodes = ours.patch_nodes(CLEAN, CORRUPTED, ANSWER, DISTRACTOR, nodes=NODES)
    traced_nodes = traced.patch_nodes(CLEAN, CORRUPTED, ANSWER, DISTRACTOR, nodes=NODES)
    assert (nodes - traced_nodes).abs().max().item() <= 1e-4


def test_ablations_and_edits_are_written_inside_the_trace(trio):
    _, ours, traced = trio
    edits = [
        explorer.Edit("resid", 1, position=-1, op="scale", value=0.5),
        explorer.Edit("mlp", 0, op="scale", value=0.0),
    ]
    for kwargs in (dict(ablate=[(1, 2), (2, 0)]), dict(edits=edits)):
        mine, theirs = ours.run(PROMPT, **kwargs), traced.run(PROMPT, **kwargs)
        assert (mine.logits - theirs.logits).abs().max().item() <= logits_tolerance(mine.logits)
        assert (mine.logits - ours.run(PROMPT).logits).abs().max().item() > 1e-3  # the edit did something


def test_greedy_generation_equals_our_engines(trio):
    _, ours, traced = trio
    mine = [step.id for step in ours.generate(PROMPT[:20], max_new_tokens=5)]
    assert [step.id for step in traced.generate(PROMPT[:20], max_new_tokens=5)] == mine


def test_every_forward_of_a_run_and_of_patching_is_an_nnsight_trace(trio, monkeypatch):
    _, _, traced = trio
    lm, traces = traced.model.lm, []
    trace = lm.trace
    monkeypatch.setattr(
        lm, "trace", lambda *args, **kwargs: traces.append(args[0].shape) or trace(*args, **kwargs)
    )
    ours_before = traced.model.inner.forward_count
    for work, forwards in (
        (lambda: traced.run(PROMPT), 1),
        (lambda: traced.patch_heads(CLEAN, CORRUPTED, ANSWER, DISTRACTOR), 2),  # the clean and corrupted runs
        (lambda: traced.patch_nodes(CLEAN, CORRUPTED, ANSWER, DISTRACTOR, nodes=NODES), 2),
    ):
        before, seen = traced.forward_count, len(traces)
        work()
        assert traced.forward_count - before == len(traces) - seen == forwards
    assert traced.model.inner.forward_count == ours_before  # no forward ran through our own blocks


def test_queries_after_rope_are_read_in_the_trace_and_refused_as_edits(trio):
    _, ours, traced = trio
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    mine, theirs = [], []
    ours.model.hidden_states(ids, taps=Taps(queries=kept_in(mine)))
    traced.model.hidden_states(ids, taps=Taps(queries=kept_in(theirs)))
    assert len(mine) == len(theirs) == ours.config.n_layers
    for q, traced_q in zip(mine, theirs, strict=True):
        assert (q - traced_q).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="cannot edit them"):
        traced.model.hidden_states(ids, taps=Taps(queries=lambda layer, q: q * 2))


def test_a_remote_load_without_a_key_fails_at_once_naming_the_variable(monkeypatch):
    """Refused before anything is asked of NDIF or the hub (no remote load begins)."""
    from explorer.nnsight_backend import loader

    def reached(*args, **kwargs):
        raise AssertionError("a remote load began without a key")

    monkeypatch.delenv("NDIF_API_KEY", raising=False)
    monkeypatch.setattr(loader, "_remote", reached)
    with pytest.raises(CheckpointError, match="NDIF_API_KEY"):
        explorer.load("meta-llama/Llama-3.1-70B", backend="nnsight", remote=True)


def test_remote_needs_the_nnsight_backend():
    with pytest.raises(ValueError, match="backend='nnsight'"):
        explorer.load("meta-llama/Llama-3.1-70B", remote=True)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory, tiny_tokenizer):
    """Our engine, and the same Llama through nnsight's local simulation of a remote (NDIF) request."""
    from explorer.nnsight_backend.loader import load_checkpoint

    directory = tmp_path_factory.mktemp("llama-remote")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", **HF_CONFIGS["llama-untied"][1])
    return explorer.load(directory, device="cpu"), Explorer(load_checkpoint(directory, remote="local"), "cpu")


def test_a_remote_run_moves_each_layers_input_and_the_final_stream_alone(simulated):
    ours, remote = simulated
    mine, theirs = ours.run(PROMPT), remote.run(PROMPT)
    assert (mine.logits - theirs.logits).abs().max().item() <= logits_tolerance(mine.logits)
    c = ours.config
    assert theirs.moved_bytes == (c.n_layers + 1) * theirs.n_tokens * c.hidden_size * 4
    assert theirs.moved_bytes == remote.model.estimate_bytes(theirs.n_tokens)
    assert "remote" in remote.runs_where and remote.backend == "nnsight"


def test_a_remote_models_weights_are_fetched_a_part_at_a_time_when_first_read(simulated):
    """A layer view fetches that layer's attention alone, once; the lens and attribution, which rerun
    blocks, fetch the MLPs too, and equal our engine's."""
    ours, remote = simulated
    blocks = remote.model.layers
    before = blocks.fetches
    run, mine = remote.run(PROMPT), ours.run(PROMPT)
    for _ in range(2):
        att = run.attention(1)
        assert (att.probs - mine.attention(1).probs).abs().max().item() <= maps_tolerance(att)
    assert blocks.fetches - before == 1 and (1, "attention") in blocks.held and (1, "mlp") not in blocks.held
    lens, remote_lens = mine.logit_lens(), run.logit_lens()
    assert (lens.top_probs - remote_lens.top_probs).abs().max().item() <= 1e-4
    attribution, remote_attribution = mine.logit_attribution(ANSWER), run.logit_attribution(ANSWER)
    assert (attribution.heads - remote_attribution.heads).abs().max().item() <= 1e-4


def test_a_remote_models_parts_past_the_budget_are_given_back_and_fetched_again(simulated):
    from explorer.nnsight_backend.loader import load_checkpoint

    ours, _ = simulated
    remote = Explorer(load_checkpoint(ours.path, remote="local", block_budget=1), "cpu")  # a block at a time
    blocks = remote.model.layers
    run, mine = remote.run(PROMPT), ours.run(PROMPT)
    for layer in (0, 2, 0):
        remote_attribution = run.logit_attribution(ANSWER, DISTRACTOR)
        assert len({held_layer for held_layer, _ in blocks.held}) == 1
        att = run.attention(layer, remember=False)
        assert (att.probs - mine.attention(layer).probs).abs().max().item() <= maps_tolerance(att)
    attribution = mine.logit_attribution(ANSWER, DISTRACTOR)
    assert (attribution.heads - remote_attribution.heads).abs().max().item() <= 1e-4


def test_a_remote_run_past_the_limit_or_with_edits_is_refused_before_it_is_sent(simulated, monkeypatch):
    _, remote = simulated
    ids = torch.tensor([[1, 2, 3, 4]])
    for taps, name in (
        (Taps(scores=lambda layer, x: None), "scores"),
        (Taps(pattern=lambda layer, x: None), "pattern"),
        (Taps(knockout=lambda layer, queries, n: None), "knockout"),
    ):
        with pytest.raises(ValueError, match=f"nnsight backend cannot read or edit {name}"):
            remote.model.hidden_states(ids, taps=taps)
    with pytest.raises(ValueError, match="remote=False"):
        remote.run(PROMPT, ablate=[(0, 1)])
    monkeypatch.setattr(remote.model, "max_moved_bytes", 1_000)
    traces = remote.model.traces
    with pytest.raises(LimitError, match=r"about \d+\.\d KB back from NDIF .*EXPLORER_NDIF_MAX_MB"):
        remote.run(PROMPT)
    assert remote.model.traces == traces


def test_every_point_is_read_where_our_engine_reads_it(trio):
    """Each tap's values in one traced forward equal our engine's, the final stream included."""
    from explorer.engine.taps import POINTS

    _, ours, traced = trio
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    points = [name for name in POINTS if name not in ("scores", "pattern")]
    mine, theirs = {name: [] for name in points}, {name: [] for name in points}
    ours.model.hidden_states(ids, taps=Taps(**{name: kept_in(mine[name]) for name in points}))
    traced.model.hidden_states(ids, taps=Taps(**{name: kept_in(theirs[name]) for name in points}))
    for name in points:
        assert len(mine[name]) == len(theirs[name]) > 0, name
        for value, traced_value in zip(mine[name], theirs[name], strict=True):
            assert (value - traced_value).abs().max().item() <= 1e-5, name


def test_an_edit_at_every_point_changes_the_forward_as_our_engines_does(trio):
    from explorer.engine.taps import POINTS

    _, ours, traced = trio
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    plain = ours.model.hidden_states(ids)
    for name in (name for name in POINTS if name not in ("scores", "pattern", "queries")):
        taps = Taps(**{name: lambda layer, x: x * 0.8 + 0.1 if layer in (1, 3) else None})
        mine, theirs = ours.model.hidden_states(ids, taps=taps), traced.model.hidden_states(ids, taps=taps)
        assert (mine - plain).abs().max().item() > 1e-3, name
        assert (mine - theirs).abs().max().item() <= 1e-4, name


def test_batches_cached_activations_and_gradient_readings_equal_our_engines(trio):
    """A padded batch, `ex.cache`, and the readings that take a backward through the traced forward
    (attribution patching, EAP-IG) equal our engine's."""
    _, ours, traced = trio
    texts = ["To be, or not to be", "that is the question: whether the", "Now"]
    batch = [run.logits_at(-1) for run in ours.run_batch(texts)]
    traced_batch = [run.logits_at(-1) for run in traced.run_batch(texts)]
    assert (torch.stack(batch) - torch.stack(traced_batch)).abs().max().item() <= 1e-4
    taps = [("resid", 1), ("z", 2)]
    kept, traced_kept = ours.cache(texts, taps, progress=False), traced.cache(texts, taps, progress=False)
    for tap in taps:
        assert abs(kept[tap] - traced_kept[tap]).max() <= 1e-5
    nodes = [("z", 1, 2, -1), ("resid", 1, -1), ("k", 0, 1, None)]
    atp = ours.attribution_patching(CLEAN, CORRUPTED, ANSWER, DISTRACTOR, nodes=nodes)
    traced_atp = traced.attribution_patching(CLEAN, CORRUPTED, ANSWER, DISTRACTOR, nodes=nodes)
    assert (atp - traced_atp).abs().max().item() <= 1e-4
    edges = ours.edge_attribution([CLEAN], [CORRUPTED], [ANSWER], [DISTRACTOR], steps=2).edges
    traced_edges = traced.edge_attribution([CLEAN], [CORRUPTED], [ANSWER], [DISTRACTOR], steps=2).edges
    scores = torch.tensor([edge[-1] for edge in edges])
    assert (scores - torch.tensor([edge[-1] for edge in traced_edges])).abs().max().item() <= 1e-4


def test_a_traced_forward_stops_at_its_time_bound_and_at_a_stop(trio):
    import threading

    from explorer.engine import deadline
    from explorer.errors import StoppedError

    _, _, traced = trio
    with pytest.raises(LimitError), deadline.bounded(1e-9, "the run"):
        traced.run(PROMPT)
    stop = threading.Event()
    stop.set()
    with pytest.raises(StoppedError), deadline.job(stop, "the run", lambda fraction: None):
        traced.run(PROMPT)
    assert traced.run(PROMPT).n_tokens > 0  # the model traces again after a stopped trace
