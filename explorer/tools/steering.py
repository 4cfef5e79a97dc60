"""`python -m explorer.tools.steering`: steering against its prompting baseline on SmolLM2, for docs/api.md's
steering table (`explorer.engine.steering`).

One concept (weddings): a direction from eight sentences about it less eight of the same shape about
other things (`ex.steering_vector`, the stream entering `LAYER`), added at every position at strengths 0 …
8; and the prompt behind an instruction to write about it. For each of three neutral prompts, greedy, 24
new tokens: the probability the model gives the concept's words at each step, and the perplexity of a
held-out paragraph about something else under the same condition. Writes bench/steering-smollm2.json
and .md.

    python -m explorer.tools.steering --threads 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

LAYER = 10
STRENGTHS = (0.0, 1.0, 2.0, 4.0, 8.0)
WORDS = ["wedding", "bride", "groom", "marriage", "married", "ceremony", "vows"]
POSITIVE = [
    "The bride walked down the aisle at the wedding.",
    "They exchanged vows at a small wedding ceremony.",
    "The groom waited nervously for his bride.",
    "Their wedding was held in a garden full of flowers.",
    "After the ceremony the married couple cut the cake.",
    "She tried on her wedding dress one last time.",
    "The guests threw rice as the newlyweds left the church.",
    "Planning a marriage ceremony takes many months.",
]
NEGATIVE = [
    "The runner walked down the track at the stadium.",
    "They exchanged notes at a small business meeting.",
    "The driver waited nervously for his passenger.",
    "Their meeting was held in a room full of chairs.",
    "After the lecture the tired students ate the lunch.",
    "She tried on her winter coat one last time.",
    "The fans threw hats as the players left the field.",
    "Planning a software release takes many months.",
]
PROMPTS = ["I went to the store and", "The weather today is", "My favourite thing about the city is"]
INSTRUCTION = "Write about a wedding."
HELD_OUT = (
    "The river rises in the hills to the north and runs south through farmland before it reaches the "
    "sea. In spring the water is high and fast; by late summer it is shallow enough to cross on foot."
)
OUT = Path("bench/steering-smollm2")


def measure(ex) -> dict:
    import torch

    from explorer.engine import steering

    vector = ex.steering_vector(POSITIVE, NEGATIVE, LAYER)
    rows: dict[str, dict] = {}
    for prompt in PROMPTS:
        for reading in steering.compare(ex, prompt, WORDS, HELD_OUT, vector, LAYER, STRENGTHS, INSTRUCTION):
            row = rows.setdefault(reading.label, {"concept": [], "perplexity": [], "continuations": []})
            row["concept"].append(reading.concept_probability)
            row["perplexity"].append(reading.held_out_perplexity)
            row["continuations"].append(prompt + reading.continuation)
    return {"vector_norm": float(torch.linalg.vector_norm(vector)), "rows": rows}


def markdown(results: dict) -> str:
    lines = [
        f"SmolLM2-135M-Instruct (Q4_1 GGUF, float32, CPU), the stream entering layer {LAYER} (the "
        f"direction's norm {results['vector_norm']:.1f}); means over {len(PROMPTS)} prompts, greedy, 24 new "
        f"tokens; {results['seconds']:.0f} s in all.",
        "",
        "| condition | p(concept word next), mean | held-out perplexity | first prompt's continuation |",
        "|---|---:|---:|---|",
    ]
    for label, row in results["rows"].items():
        shown = row["continuations"][0].replace("\n", " ").replace("|", "\\|")
        lines.append(
            f"| {label} | {statistics.mean(row['concept']):.4f} | {statistics.mean(row['perplexity']):.1f} "
            f"| {shown} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    import torch

    import explorer
    from explorer.loading.catalog import SMOLLM2_INSTALL, smollm2_gguf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    path = smollm2_gguf()
    if path is None:
        raise SystemExit(f"SmolLM2 is not installed: {SMOLLM2_INSTALL}")
    ex = explorer.load(path, device="cpu")
    start = time.perf_counter()
    results = measure(ex)
    results["seconds"] = time.perf_counter() - start
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results)
    OUT.with_suffix(".md").write_text(text)
    print(text)
    return results


if __name__ == "__main__":
    main()
