"""What heads actually move (`explorer.engine.flow`), against a reference built from transformers' eager
model with hooks (v_proj's outputs, o_proj's weights, the stream entering each block and before each
post-attention norm, the MLP's output) and the LLM Transparency Tool's formulas, materialised in full:
a llama with GQA (8 query heads, 2 kv heads) and a qwen2 with MQA (one kv head)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import explorer
from explorer.engine import flow
from tests.conftest import make_hf_checkpoint

PROMPT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"
CONFIGS = {"llama-gqa": ("llama", {}), "qwen2-mqa": ("qwen2", dict(num_key_value_heads=1))}


@dataclass
class Reference:
    """One prompt through transformers' eager model, read by hooks; every layer's parts in full."""

    probs: list[torch.Tensor]  # [H, N, N] per layer
    writes: list[torch.Tensor]  # [H, N, hidden] v[g(h), j] · W_O[h]
    block_input: list[torch.Tensor]  # [N, hidden]
    after_attention: list[torch.Tensor]  # [N, hidden]
    mlp_output: list[torch.Tensor]  # [N, hidden]

    def attention_shares(self, layer: int, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The tool's `get_attention_contributions` at query i, keys ≤ i the only parts.
        # -> heads [H, i+1], residual []"""
        parts = self.probs[layer][:, i, : i + 1, None] * self.writes[layer][:, : i + 1]  # [H, i+1, hidden]
        flat = torch.cat([parts.reshape(-1, parts.shape[-1]), self.block_input[layer][i][None]])
        c = tool_contributions(flat, self.after_attention[layer][i])
        return c[:-1].view(parts.shape[:2]), c[-1]

    def mlp_shares(self, layer: int, i: int) -> torch.Tensor:
        whole = self.after_attention[layer][i] + self.mlp_output[layer][i]
        return tool_contributions(
            torch.stack([self.mlp_output[layer][i], self.after_attention[layer][i]]), whole
        )


def tool_contributions(parts: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """`get_contributions` of the LLM Transparency Tool with the L1 distance, in float64."""
    parts, whole = parts.double(), whole.double()
    distance = torch.nn.functional.pairwise_distance(parts, whole.expand_as(parts), p=1, eps=0)
    proximity = (whole.abs().sum() - distance).clip(min=1e-5)
    return (proximity / proximity.sum()).float()


def reference(hf_model, ids: list[int]) -> Reference:
    layers = hf_model.model.layers
    seen: dict[str, list] = {name: [] for name in ("v", "input", "mid", "mlp")}
    hooks = []
    for layer in layers:
        hooks += [
            layer.self_attn.v_proj.register_forward_hook(lambda m, a, out: seen["v"].append(out[0])),
            layer.input_layernorm.register_forward_pre_hook(lambda m, a: seen["input"].append(a[0][0])),
            layer.post_attention_layernorm.register_forward_pre_hook(
                lambda m, a: seen["mid"].append(a[0][0])
            ),
            layer.mlp.register_forward_hook(lambda m, a, out: seen["mlp"].append(out[0])),
        ]
    try:
        with torch.no_grad():
            out = hf_model(torch.tensor([ids]), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
    config = hf_model.config
    H, H_kv, d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    writes = []
    for layer, v in zip(layers, seen["v"], strict=True):
        v = v.view(len(ids), H_kv, d).transpose(0, 1)[torch.arange(H) // (H // H_kv)]  # [H, N, d]
        w_o = layer.self_attn.o_proj.weight.detach().view(-1, H, d).transpose(0, 1)  # [H, hidden, d]
        writes.append(v @ w_o.transpose(1, 2))
    return Reference(
        probs=[a[0] for a in out.attentions],
        writes=writes,
        block_input=seen["input"],
        after_attention=seen["mid"],
        mlp_output=seen["mlp"],
    )


@pytest.fixture(scope="module", params=list(CONFIGS))
def pair(request, tmp_path_factory, tiny_tokenizer):
    model_type, overrides = CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    run = explorer.load(directory, device="cpu").run(PROMPT)
    return reference(hf_model, run.ids), run


def test_the_hand_computed_case_gives_its_shares_under_l1():
    """Parts [1, 1] and [−1, 0], residual [2, 1], whole [2, 2]: proximities 2, −1 (clipped) and 3."""
    c = flow.shares(torch.tensor([[1.0, 1.0], [-1.0, 0.0], [2.0, 1.0]]), torch.tensor([2.0, 2.0]))
    assert torch.allclose(c, torch.tensor([0.4, 0.0, 0.6]), atol=1e-5) and 0 < c[1] < 1e-5


def test_weighted_norms_are_each_weight_times_the_norm_of_what_its_key_writes(pair):
    ref, run = pair
    for layer in range(run.config.n_layers):
        expected = (ref.probs[layer][..., None] * ref.writes[layer][:, None]).norm(dim=-1)  # [H, N, N]
        got = run.attention(layer).weighted_norms
        assert torch.allclose(got, expected, rtol=1e-4, atol=1e-4 * float(expected.max()))


@pytest.mark.parametrize("position", [-1, 5])
def test_contributions_are_the_tools_shares_and_each_step_sums_to_one(pair, position):
    ref, run = pair
    i = position % run.n_tokens
    for layer in range(run.config.n_layers):
        c = run.contributions(layer, position)
        heads, residual = ref.attention_shares(layer, i)
        assert torch.allclose(c.heads[:, : i + 1], heads, atol=1e-4)
        assert (c.heads[:, i + 1 :] == 0).all()  # keys after the query are not parts
        assert c.residual == pytest.approx(float(residual), abs=1e-4)
        assert float(c.heads.sum()) + c.residual == pytest.approx(1.0, abs=1e-5)
        mlp, kept = ref.mlp_shares(layer, i)
        assert (c.mlp, c.mlp_residual) == (
            pytest.approx(float(mlp), abs=1e-4),
            pytest.approx(float(kept), abs=1e-4),
        )
        assert c.mlp + c.mlp_residual == pytest.approx(1.0, abs=1e-6)


def test_rollout_is_the_row_of_the_product_of_the_half_identity_mixed_maps(pair):
    ref, run = pair
    n = run.n_tokens
    product = torch.eye(n, dtype=torch.float64)
    for probs in ref.probs:  # Â_{L−1} ⋯ Â_0, built whole
        product = (0.5 * probs.double().mean(0) + 0.5 * torch.eye(n, dtype=torch.float64)) @ product
    for position in (-1, 7):
        row = run.rollout(position)
        assert torch.allclose(row.double(), product[position % n], atol=1e-5)
        assert float(row.sum()) == pytest.approx(1.0, abs=1e-5)


def reference_graph(ref: Reference, n_layers: int, position: int, threshold: float) -> dict:
    """The tool's full graph (every layer and position, thresholds renormalised) walked back from the
    output at `position`: {(layer, from, to, kind): weight}."""
    edges, reached = {}, {position}
    for layer in reversed(range(n_layers)):
        after = set()
        for i in sorted(reached):
            shares = ref.mlp_shares(layer, i)
            shares = shares * (shares > threshold)
            shares = shares / shares.sum()
            for w, kind in zip(shares.tolist(), ("mlp", "mlp_residual"), strict=True):
                if w > threshold:
                    edges[(layer, i, i, kind)] = w
                    after.add(i)
        below = set()
        for i in sorted(after):
            heads, residual = ref.attention_shares(layer, i)
            heads, residual = heads * (heads > threshold), residual * (residual > threshold)
            total = heads.sum() + residual
            heads, residual = heads / total, residual / total
            for j, w in enumerate(heads.sum(0).tolist()):
                if w > threshold:
                    edges[(layer, j, i, "attention")] = w
                    below.add(j)
            if residual > threshold:
                edges[(layer, i, i, "residual")] = float(residual)
                below.add(i)
        reached = below
    return edges


@pytest.mark.parametrize("threshold", [0.04, 0.01])
def test_the_graph_is_the_tools_graph_walked_back_from_the_output(pair, threshold):
    ref, run = pair
    g = run.information_flow(-1, threshold)
    got = {(e.layer, e.from_token, e.to_token, e.kind): e.weight for e in g.edges}
    expected = reference_graph(ref, run.config.n_layers, run.n_tokens - 1, threshold)
    assert got.keys() == expected.keys()
    for key, weight in expected.items():
        assert got[key] == pytest.approx(weight, abs=1e-4)
    assert all(e.weight >= threshold for e in g.edges)
    assert any(e.kind == "attention" and e.from_token != e.to_token for e in g.edges)
    for e in g.edges:
        if e.kind == "attention":
            assert sum(w for _, w in e.heads) == pytest.approx(e.weight, abs=1e-5)
            assert [w for _, w in e.heads] == sorted((w for _, w in e.heads), reverse=True)


def test_a_zero_ablated_head_moves_nothing_and_a_mean_ablation_is_refused(pair):
    _, run = pair
    ablated = run.explorer.run(PROMPT, ablate=[(1, 2)])
    c = ablated.contributions(1, -1)
    assert float(c.heads[2].max()) < 1e-6  # its parts are zero vectors: the floor's share, no more
    assert float(c.heads.sum()) + c.residual == pytest.approx(1.0, abs=1e-5)
    mean = run.explorer.run(PROMPT, ablate=[(1, 2)], ablate_mode="mean")
    with pytest.raises(ValueError, match="mean-ablated"):
        mean.information_flow()


def test_bad_positions_layers_and_thresholds_are_refused_clearly(pair):
    _, run = pair
    for call, message in (
        (lambda: run.contributions(run.config.n_layers, -1), "layer must be"),
        (lambda: run.contributions(0, run.n_tokens), "position must be"),
        (lambda: run.information_flow(-1, 1.5), "threshold must be"),
        (lambda: run.rollout("last"), "position must be"),
    ):
        with pytest.raises(ValueError, match=message):
            call()


# --- SmolLM2, as transformers reads its GGUF ----------------------------------------------------------

IOI = "When Mary and John went to the store, John gave a drink to"


@pytest.fixture(scope="module")
def smollm2_pair(smollm2_path, smollm2_explorer):
    from tests.test_gguf import hf_from_gguf

    run = smollm2_explorer.run(IOI)
    return reference(hf_from_gguf(smollm2_path)[0], run.ids), run


@pytest.mark.slow
def test_smollm2_norms_shares_rollout_and_graph_match_transformers(smollm2_pair):
    ref, run = smollm2_pair
    i = run.n_tokens - 1
    for layer in (0, 12, 29):
        expected = (ref.probs[layer][..., None] * ref.writes[layer][:, None]).norm(dim=-1)
        got = run.attention(layer).weighted_norms
        assert torch.allclose(got, expected, rtol=5e-4, atol=5e-4 * float(expected.max()))
        c = run.contributions(layer, -1)
        heads, residual = ref.attention_shares(layer, i)
        assert torch.allclose(c.heads[:, : i + 1], heads, atol=5e-4)
        assert c.residual == pytest.approx(float(residual), abs=5e-4)
        assert c.mlp == pytest.approx(float(ref.mlp_shares(layer, i)[0]), abs=5e-4)
    n = run.n_tokens
    product = torch.eye(n, dtype=torch.float64)
    for probs in ref.probs:
        product = (0.5 * probs.double().mean(0) + 0.5 * torch.eye(n, dtype=torch.float64)) @ product
    assert torch.allclose(run.rollout(-1).double(), product[-1], atol=5e-4)
    threshold = 0.04
    g = run.information_flow(-1, threshold)
    got = {(e.layer, e.from_token, e.to_token, e.kind): e.weight for e in g.edges}
    expected = reference_graph(ref, run.config.n_layers, i, threshold)
    for key in got.keys() ^ expected.keys():  # only an edge at the threshold may fall either side
        assert abs(got.get(key, expected.get(key)) - threshold) < 5e-4, key
    for key in got.keys() & expected.keys():
        assert got[key] == pytest.approx(expected[key], abs=5e-4)
    assert all(e.weight >= threshold for e in g.edges)


def first_token_share(run, layers: range, weighted: bool) -> float:
    """The first token's mean share of a row (rows after it, every head), attention weights or their
    weighted norms normalised per row."""
    shares = []
    for layer in layers:
        att = run.attention(layer, remember=False)
        rows = att.weighted_norms if weighted else att.probs  # [H, N, N]
        rows = rows / rows.sum(-1, keepdim=True)
        shares.append(rows[:, 1:, 0].mean())
    return float(torch.stack(shares).mean())


@pytest.mark.slow
def test_on_smollm2_the_first_tokens_share_drops_when_weighted_by_what_it_writes(smollm2_explorer):
    run = smollm2_explorer.run(IOI)
    plain = first_token_share(run, range(12, 27), weighted=False)
    weighted = first_token_share(run, range(12, 27), weighted=True)
    assert plain > 0.5 and weighted < 0.8 * plain, (plain, weighted)  # measured: 0.68 -> 0.46


# --- the Flow tab, served -----------------------------------------------------------------------------


def test_the_flow_endpoint_draws_the_engines_graph_and_rollout(gqa_checkpoint):
    import json

    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from explorer.tools.stress_client import App, status_of
    from tests.conftest import served

    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy())
    with served(workspace) as url:
        app = App(url, timeout=60)
        assert app.call("run", [PROMPT, 0, 0], "flow")[0]
        ok, (status, _, position, *_) = app.call("flow", [0.04], "flow")  # the tab opened
        assert ok and position["value"] == workspace.run("", PROMPT).n_tokens - 1
        ok, (status, graph, rollout) = app.call("flow_at", [0.02, 9], "flow")
        run = workspace.run("", PROMPT)
        g = run.information_flow(9, 0.02)
        drawn = json.loads(graph["plot"])
        midpoints = next(t for t in drawn["data"] if t.get("mode") == "markers")
        assert ok and status_of([status]) == "" and len(midpoints["text"]) == len(g.edges)
        assert "(position 9)" in drawn["layout"]["title"]["text"]
        bars = json.loads(rollout["plot"])["data"][0]
        assert len(bars["x"]["bdata"] if isinstance(bars["x"], dict) else bars["x"]) > 0
        assert "rollout" in json.loads(rollout["plot"])["layout"]["title"]["text"]
        ok, answer = app.call("flow_at", [0.9, 9], "flow")  # past the slider's range: named
        assert "0.9" in (answer if isinstance(answer, str) else status_of([answer[0]]))


@pytest.mark.slow
def test_on_smollm2_the_capital_of_frances_key_route_is_the_boldest_and_named_23_4(smollm2_explorer):
    """Head 23.4 moves “ France” into “ is”: of the routes between two tokens it carries the most of the
    output, so it is drawn widest and named first."""
    from explorer import views

    run = smollm2_explorer.run("The capital of France is")
    graph = views.flow(run)[0].figure()
    assert graph.layout.annotations[0].text == "<b>23.4</b>"
    markers = next(t for t in graph.data if t.mode == "markers" and t.customdata is not None)
    hover = markers.text[list(map(tuple, markers.customdata)).index((23, 4))]
    assert "“ France” (3) → “ is” (4)" in hover
