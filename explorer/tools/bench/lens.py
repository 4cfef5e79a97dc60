"""`python -m explorer.bench --lens`: the logit lens, direct logit attribution and `attention_to` against
one fast forward of the same prompt (`explorer.tools.bench.against`). Writes `bench/lens-DEVICE.*`.

    python -m explorer.bench --lens [--quick] [--lengths 256]
"""

from __future__ import annotations

from explorer.tools.bench.against import Measure, Suite

WINDOW = 64  # positions of the windowed grid (the app shows a window past ~128 positions)
FORWARD = "one forward"


def baselines(run, text: str) -> dict:
    return {FORWARD: lambda: run.explorer.run(text)}  # a fresh forward each call


def measures(run) -> list[Measure]:
    n, tokens = run.n_tokens, run.explorer.tokenizer
    answer, distractor = (tokens.decode([i]) for i in run.logits_at(-1).topk(2).indices.tolist())
    window = list(range(n - WINDOW, n))
    return [
        Measure(
            "full grid",
            "`run.logit_lens()`: top-5 and KL at every layer and position",
            lambda: run.logit_lens(),
            FORWARD,
            10.0,
        ),
        Measure(
            "64-position window",
            "`run.logit_lens(positions=…64 positions…)`",
            lambda: run.logit_lens(positions=window),
            FORWARD,
            3.0,
        ),
        Measure(
            "last position",
            "`run.logit_lens(positions=[-1])`: every layer at the last position",
            lambda: run.logit_lens(positions=[-1]),
            FORWARD,
            0.2,
        ),
        Measure(
            "attribution",
            "`run.logit_attribution(answer, distractor)` at the last position",
            lambda: run.logit_attribution(answer, distractor),
            FORWARD,
            0.5,
        ),
        Measure(
            "attention_to",
            "`run.attention_to(key)`: every head's weight from the last position",
            lambda: run.attention_to(1),
            FORWARD,
            None,
        ),
    ]


SUITE = Suite("lens", "The lens against one forward", baselines, measures)
