"""`python -m explorer.bench --flow`: contributions, the information-flow graph, rollout and the weighted
norms (`explorer.engine.flow`), against one fast forward of the same prompt or a layer's eager rerun
(`explorer.tools.bench.against`). Writes `bench/flow-DEVICE.*`.

    python -m explorer.bench --flow [--quick] [--lengths 256]
"""

from __future__ import annotations

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
            "eager rerun + weighted norms",
            f"`run.attention({layer}).weighted_norms`, computed afresh",
            lambda: run.attention(layer, remember=False).weighted_norms,
            EAGER,
            1.3,
        ),
    ]


SUITE = Suite("flow", "Contributions, the graph and weighted norms", baselines, measures)
