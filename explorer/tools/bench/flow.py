"""`python -m explorer.bench --flow`: contributions, the information-flow graph, rollout and the weighted
norms (`explorer.engine.flow`), against one fast forward of the same prompt or a layer's eager rerun
(`explorer.tools.bench.against`). Writes `bench/flow-DEVICE.*`.

    python -m explorer.bench --flow [--quick] [--lengths 256]
"""

from __future__ import annotations

from explorer.engine.attention import value_norms
from explorer.tools.bench.against import Measure, Suite

FORWARD, EAGER = "one forward", "a layer's eager rerun"


def middle(run) -> int:
    return run.config.n_layers // 2


def baselines(run, text: str) -> dict:
    layer = middle(run)
    return {
        FORWARD: lambda: run.explorer.run(text),  # a fresh forward each call
        EAGER: lambda: run.attention(layer, remember=False),  # not cached: computed each call
    }


def weighted_norms(run, layer: int):
    """The work `weighted_norms` adds to a layer's eager rerun, alone: the value norms `project` computes
    with the projections, and the weights times them."""
    attn = run.explorer.model.layers[layer].self_attn
    att = run.attention(layer, remember=False)
    return lambda: att.probs * value_norms(attn, att.v)[:, None, :]


def measures(run) -> list[Measure]:
    layer = middle(run)
    return [
        Measure(
            "contributions",
            f"`run.contributions({layer}, -1)`: every part's share at one position",
            lambda: run.contributions(layer, -1),
            None,
            0.2,
        ),
        Measure(
            "graph",
            "`run.information_flow(-1, 0.04)`: the routes to the last position",
            lambda: run.information_flow(-1, 0.04),
            FORWARD,
            3.0,
        ),
        Measure(
            "rollout",
            "`run.rollout(-1)`: one row through every layer",
            lambda: run.rollout(-1),
            FORWARD,
            None,
        ),
        Measure(
            "weighted norms",
            "what they add to the eager rerun: ‖v·W_O[h]‖ per key (in `project`), then α × that",
            weighted_norms(run, layer),
            EAGER,
            0.3,
        ),
    ]


SUITE = Suite("flow", "Contributions, the graph and weighted norms", baselines, measures)
