"""`python -m explorer.tools.scorecard`: MIB's circuit-localisation scorecard (`ex.circuit_scorecard`) of
the engine's edge rankings on SmolLM2's built-in tasks, for docs/circuits.md.

Methods: EAP (EAP-IG with one step: the gradient at the clean run), EAP-IG (5 steps), EAP-IG per
position (the graph's every positional edge, 5 steps), AtP top nodes (every head's output and MLP
ranked by |AtP|, scored as node circuits: `engine.scorecard.ranked_by_nodes`). Tasks: IOI of one
template (its pairs of one length, as a positional graph needs) and induction; 8 pairs each. The
first seed's scores come with their bootstrap intervals over pairs; five seeds (five datasets drawn
again) give each score's mean and spread. Writes bench/scorecard-smollm2.json and prints the table.

    python -m explorer.tools.scorecard --threads 2
    python -m explorer.tools.scorecard --methods "AtP top nodes"   # those rows again, the others kept
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

METHODS = ("EAP", "EAP-IG", "EAP-IG per position", "AtP top nodes")
TASKS = ("ioi", "induction")
PAIRS = 8
SEEDS = (0, 1, 2, 3, 4)
OUT = Path("bench/scorecard-smollm2.json")


def dataset(task: str, seed: int, tokenizer):
    from explorer.engine import prompt_sets

    if task == "ioi":
        return prompt_sets.ioi(PAIRS, seed, tokenizer, template=0)
    return prompt_sets.induction(PAIRS, seed, tokenizer)


def ranking(ex, method: str, args):
    if method == "AtP top nodes":
        from explorer.engine.scorecard import ranked_by_nodes

        c = ex.config
        nodes = [("head", l, h) for l in range(c.n_layers) for h in range(c.n_heads)]
        nodes += [("mlp", l) for l in range(c.n_layers)]
        asked = [
            ("z", *node[1:], None) if node[0] == "head" else (*node, None) for node in nodes
        ]  # every position
        scores = ex.attribution_patching(*args, nodes=asked).abs().tolist()
        return ranked_by_nodes(c, dict(zip(nodes, scores, strict=True)))
    if method == "EAP":
        return ex.edge_attribution(*args, steps=1)
    if method == "EAP-IG":
        return ex.edge_attribution(*args, steps=5)
    return ex.attribution_graph(*args, steps=5)


def measure(ex, methods=METHODS) -> list[dict]:
    rows = []
    for task in TASKS:
        for seed in SEEDS:
            args = dataset(task, seed, ex.tokenizer).args()
            for method in methods:
                start = time.perf_counter()
                card = ex.circuit_scorecard(*args, edges=ranking(ex, method, args))
                rows.append(
                    dict(
                        task=task,
                        seed=seed,
                        method=method,
                        cpr=card.cpr,
                        cmd=card.cmd,
                        cpr_interval=card.cpr_interval,
                        cmd_interval=card.cmd_interval,
                        faithfulness=card.faithfulness,
                        counts=card.counts,
                        edges=card.n_edges,
                        clean=card.clean,
                        corrupted=card.corrupted,
                        seconds=time.perf_counter() - start,
                    )
                )
                print(f"{task} seed {seed} {method}: CPR {card.cpr:.3f} CMD {card.cmd:.3f}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    header = "| task | method | CPR, seed 0 [95% CI] | CMD, seed 0 [95% CI] | CPR, 5 seeds | CMD, 5 seeds |"
    lines = [header, "|---|---|---|---|---|---|"]
    for task in TASKS:
        for method in METHODS:
            mine = [r for r in rows if r["task"] == task and r["method"] == method]
            first = next(r for r in mine if r["seed"] == SEEDS[0])

            cpr = f"{first['cpr']:.3f} [{first['cpr_interval'][0]:.3f}, {first['cpr_interval'][1]:.3f}]"
            cmd = f"{first['cmd']:.3f} [{first['cmd_interval'][0]:.3f}, {first['cmd_interval'][1]:.3f}]"
            lines.append(
                f"| {task} | {method} | {cpr} | {cmd} | {spread(mine, 'cpr')} | {spread(mine, 'cmd')} |"
            )
    return "\n".join(lines)


def spread(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows]
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    args = parser.parse_args(argv)
    import torch

    import explorer
    from explorer.loading.catalog import SMOLLM2_INSTALL, smollm2_gguf

    if args.threads:
        torch.set_num_threads(args.threads)
    path = smollm2_gguf()
    if path is None:
        raise SystemExit(f"SmolLM2 is not installed: {SMOLLM2_INSTALL}")
    rows = measure(explorer.load(path, device="cpu"), args.methods)
    if OUT.exists():  # the other methods' rows as measured before
        rows += [row for row in json.loads(OUT.read_text())["rows"] if row["method"] not in args.methods]
    rows.sort(key=lambda row: (TASKS.index(row["task"]), row["seed"], METHODS.index(row["method"])))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"pairs": PAIRS, "seeds": list(SEEDS), "rows": rows}, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
