"""`python -m explorer.bench --circuits`: node and edge attribution, the exact circuit metric and the
position-level patching sweep, each against one fast forward of an IOI prompt (`explorer.tools.bench
.against`), on SmolLM2 with 15-token IOI pairs (`explorer.engine.prompt_sets.ioi`, the pairs of that
length). Writes `bench/circuits-DEVICE.*`.

    python -m explorer.bench --circuits --threads 2
"""

from __future__ import annotations

from explorer.tools.bench.against import Measure, Suite

FORWARD = "one forward"
EAP_IG = "EAP-IG, 5 steps, 8 pairs"
IOI_TOKENS = 15
PAIRS = 8
LAST_POSITIONS = 4


def ioi_pairs(ex, n_tokens: int = IOI_TOKENS, count: int = PAIRS):
    """`count` seeded IOI pairs of `n_tokens` tokens (the generator's templates differ in length)."""
    from explorer.engine.prompt_sets import PromptSet, ioi

    drawn = ioi(count * 8, seed=0, tokenizer=ex.tokenizer)
    rows = [
        row for row in zip(*drawn.args(), strict=True) if len(ex.tokenizer.encode(row[0]).ids) == n_tokens
    ]
    if len(rows) < count:
        raise SystemExit(f"only {len(rows)} IOI pairs of {n_tokens} tokens in this tokenizer")
    return PromptSet("ioi", *(list(column) for column in zip(*rows[:count], strict=True)))


def baselines(run, text: str) -> dict:
    data = ioi_pairs(run.explorer)
    return {
        FORWARD: lambda: run.explorer.run(data.clean[0]),
        EAP_IG: lambda: run.explorer.edge_attribution(*data.args(), steps=5),
    }


def measures(run) -> list[Measure]:
    ex, c = run.explorer, run.config
    data = ioi_pairs(ex)
    one = (data.clean[0], data.corrupted[0], data.answers[0], data.distractors[0])
    every_head = [("z", layer, head, None) for layer in range(c.n_layers) for head in range(c.n_heads)]
    n = len(ex.tokenizer.encode(one[0]).ids)
    at_positions = [
        ("z", layer, head, pos)
        for layer in range(c.n_layers)
        for head in range(c.n_heads)
        for pos in range(n - LAST_POSITIONS, n)
    ]
    every_position = [(kind, layer, head, pos) for kind, layer, head, _ in every_head for pos in range(n)]
    edges = ex.edge_attribution(*data.args(), steps=5).edges
    kept = edges[: len(edges) // 10]
    graph = ex.attribution_graph(*data.args(), steps=5)
    per_node = len(at_positions)
    return [
        Measure(
            "AtP, every head at every position",
            f"`ex.attribution_patching` of {len(every_position):,} z nodes, one pair",
            lambda: ex.attribution_patching(*one, nodes=every_position),
            FORWARD,
            4.0,
        ),
        Measure(
            "AtP* (QK fix), every head's q at the last position",
            f"`qk_fix=True` on {c.n_layers * c.n_heads} q nodes, one pair: exact patterns, shown beside AtP",
            lambda: ex.attribution_patching(
                *one, nodes=[("q", l, h, -1) for _, l, h, _ in every_head], qk_fix=True
            ),
            FORWARD,
            None,
        ),
        Measure(
            "EAP-IG, 5 steps, 8 pairs",
            f"`ex.edge_attribution` of every edge ({len(edges):,}) over {PAIRS} pairs",
            lambda: ex.edge_attribution(*data.args(), steps=5),
            FORWARD,
            100.0,
        ),
        Measure(
            "Positional graph, 5 steps, 8 pairs",
            f"`ex.attribution_graph` of every positional edge ({len(graph):,}) over {PAIRS} pairs, against "
            "EAP-IG of the same pairs",
            lambda: ex.attribution_graph(*data.args(), steps=5),
            EAP_IG,
            1.2,
        ),
        Measure(
            "Pruning the positional graph",
            f"`graph.pruned()` of {len(graph):,} edges to {len(graph.pruned()):,}, in seconds",
            graph.pruned,
            None,
            1.0,
        ),
        Measure(
            "circuit_metric, top 10% of edges",
            f"`ex.circuit_metric` of {len(kept):,} kept edges, one pair, exact, its corrupted run kept "
            "from an earlier call on the pair (the warm-up's)",
            lambda: ex.circuit_metric(*one, edges=kept),
            FORWARD,
            2.0,
        ),
        Measure(
            "circuit_metric, top 10% of edges, first call",
            "the same with no corrupted run kept: it records the pair's corrupted run first",
            lambda: first_circuit_metric(ex, one, kept),
            FORWARD,
            None,
        ),
        Measure(
            f"exact sweep, every head at the last {LAST_POSITIONS} positions, per node",
            f"`ex.patch_nodes` of {per_node:,} z nodes, one pair; the ratio is per node",
            lambda: ex.patch_nodes(*one, nodes=at_positions),
            FORWARD,
            0.5 * per_node,
        ),
    ]


def first_circuit_metric(ex, one, kept):
    ex.corrupted_runs.clear()
    return ex.circuit_metric(*one, edges=kept)


SUITE = Suite("circuits", "Circuits: node and edge attribution, exact patching", baselines, measures)


FRACTIONS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def ioi_circuit(ex, pairs: int = PAIRS, seed: int = 0, steps: int = 5) -> dict:
    """The acceptance measurement: the EAP-IG circuit of the built-in IOI set, its faithfulness curve
    (recovered = (circuit − corrupted) / (clean − corrupted), by `ex.circuit_metric`), the heads of its
    top 10% of edges beside the exact node patching's top heads."""
    import torch

    from explorer.engine import exact_circuits
    from explorer.engine import pairs as pair_module
    from explorer.engine.prompt_sets import ioi

    data = ioi(pairs, seed, ex.tokenizer)
    c = ex.config
    attribution = ex.edge_attribution(*data.args(), steps=steps)
    ranked = attribution.edges
    counts = [round(f * len(ranked)) for f in FRACTIONS]
    encoded = pair_module.dataset(ex, *data.args())
    metrics = exact_circuits.faithfulness(ex, encoded, ranked, counts)
    clean, corrupted = metrics[-1], metrics[0]
    curve = [
        {"fraction": f, "edges": k, "metric": m, "recovered": (m - corrupted) / (clean - corrupted)}
        for f, k, m in zip(FRACTIONS, counts, metrics, strict=True)
    ]
    weight: dict[tuple[int, int], float] = {}
    for up, down, score in ranked[: len(ranked) // 10]:
        for node in (up, down):
            if node[0] not in ("head", "q"):  # heads by their writes and queries; kv heads are shared
                continue
            head = node[1:]
            weight[head] = weight.get(head, 0.0) + abs(score)
    circuit_heads = sorted(weight, key=weight.get, reverse=True)
    nodes = [("z", layer, head, None) for layer in range(c.n_layers) for head in range(c.n_heads)]
    patched = ex.patch_nodes(*data.args(), nodes=nodes)
    recovered = (patched - corrupted) / (clean - corrupted)
    order = recovered.abs().argsort(descending=True).tolist()
    top = [(nodes[i][1], nodes[i][2], float(recovered[i])) for i in order[:15]]
    qk_nodes = [("q", layer, head, -1) for layer in range(c.n_layers) for head in range(c.n_heads)]
    qk_nodes += [("k", layer, kv, None) for layer in range(c.n_layers) for kv in range(c.n_kv_heads)]
    exact = ex.patch_nodes(*data.args(), nodes=qk_nodes) - corrupted
    estimates = {
        name: ex.attribution_patching(*data.args(), nodes=qk_nodes, qk_fix=fix)
        for name, fix in (("AtP", False), ("AtP*", True))
    }
    atp_star = {
        name: {
            "mean_abs_error": float((value - exact).abs().mean()),
            "correlation": float(torch.corrcoef(torch.stack([value, exact]))[0, 1]),
        }
        for name, value in estimates.items()
    }
    return {
        "atp_vs_exact": {
            "nodes": "q of every head at the last position, k of every kv head at every position",
            **atp_star,
        },
        "pairs": data.clean,
        "clean": clean,
        "corrupted": corrupted,
        "n_edges": len(ranked),
        "curve": curve,
        "circuit_heads": [(layer, head, weight[layer, head]) for layer, head in circuit_heads[:15]],
        "exact_top_heads": top,
        "top_edges": [(list(u), list(v), s) for u, v, s in ranked[:20]],
    }


def main() -> None:
    import json
    import sys

    import torch

    import explorer
    from explorer.loading.catalog import smollm2_gguf

    torch.set_num_threads(2)
    result = ioi_circuit(explorer.load(smollm2_gguf(), device="cpu"))
    json.dump(result, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
