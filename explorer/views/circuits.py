"""A circuit found on a dataset of prompt pairs (`engine.pairs`), and its figures: every head's output
patched exactly and by attribution (AtP), every edge scored by EAP-IG, and the circuits of the top
edges measured exactly (`engine.exact_circuits.faithfulness`); recovered = (value − corrupted) / (clean −
corrupted), so 1 is the clean run's metric and 0 the corrupted run's."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from explorer.engine import deadline, exact_circuits, pairs, prompt_sets
from explorer.engine import edges as edge_module
from explorer.engine import graph as graph_module
from explorer.engine import nodes as node_module
from explorer.engine.patch_metrics import METRIC_NAMES
from explorer.figures import circuits as figures
from explorer.figures.plot import Plot
from explorer.views import attribution_graph

METHODS = ("exact", "atp", "eap", "graph")  # the exact node sweep, AtP, EAP-IG, EAP-IG per position
METHOD_NAMES = {"exact": "exact node sweep", "atp": "AtP", "eap": "EAP-IG", "graph": "graph per position"}
CURVE_SHARES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # of the edges, where the curve is measured
EAP_STEPS = 5
DEFAULT_EDGES = 0.1  # the graph's first share of the edges
READABLE_WRITERS = 60  # the most heads and MLPs a graph per position draws before its influence is set
INFLUENCE_STEP = 0.05  # the steps of the share of influence a graph per position keeps
# Where each head's output is patched: every position at once, or each of some positions alone
POSITIONS = {
    "heads": "every position at once",
    "last": "each of the last 4 positions",
    "differ": "each position from the first difference on",
}
LAST_POSITIONS = 4
MAX_POSITIONS = 16  # the most positions a node map draws (from the end)


@dataclass(frozen=True, eq=False)
class Circuit:
    """What a circuit reading found, on CPU: everything its figures and its CSV read."""

    metric: str
    clean: float  # the metric of the clean run, averaged over the pairs
    corrupted: float  # and of the corrupted run
    n_layers: int
    n_heads: int
    n_kv_heads: int
    exact: np.ndarray | None  # [L, H] the metric with each head's output patched from the clean run
    # ([L, H, P] at each of `positions`)
    atp: np.ndarray | None  # [L, H] AtP's estimate of that patch's change of the metric ([L, H, P])
    edges: list | None  # (upstream, downstream, score), largest |score| first (EAP-IG)
    curve: list[tuple[int, float]]  # (edges kept, the circuit's metric), measured exactly
    positions: tuple[int, ...] | None = None  # [P] the patched positions, from the end (−1 the last)
    position_tokens: tuple[str, ...] = ()  # [P] the first pair's clean tokens there
    graph: graph_module.Graph | None = None  # per position, pruned, of the pairs of one length
    graph_scored: int = 0  # the positional edges the graph was pruned from
    graph_whole: graph_module.Graph | None = None  # every one of them, which `regraphed` prunes again
    graph_influence: float = graph_module.NODE_THRESHOLD  # the writers' share of influence `graph` keeps

    @property
    def span(self) -> float:
        return self.clean - self.corrupted

    def recovered(self, value: float | np.ndarray) -> float | np.ndarray:
        return (value - self.corrupted) / self.span if self.span else np.full_like(value, np.nan)


def head_nodes(config, positions=None) -> list[tuple]:
    """Every head's output at every position at once, layer by layer: the nodes of the head sweep; with
    `positions`, each head at each of them (layer, head, position order)."""
    at = [None] if positions is None else list(positions)
    return [("z", layer, h, p) for layer in range(config.n_layers) for h in range(config.n_heads) for p in at]


def positions_of(data: pairs.Dataset, choice: str) -> tuple[int, ...] | None:
    """The positions, from the end, that `choice` (POSITIONS) patches a head at: None (every one at
    once), the last LAST_POSITIONS, or those from the first difference of any pair on; at most
    MAX_POSITIONS and the shortest pair's length."""
    if choice not in POSITIONS:
        raise ValueError(f"There is no choice of positions {choice!r}: {', '.join(POSITIONS)}.")
    if choice == "heads":
        return None
    shortest = min(batch.n_tokens for batch in data.batches)
    count = differ_positions(data) if choice == "differ" else LAST_POSITIONS
    count = max(1, min(count, shortest, MAX_POSITIONS))
    return tuple(range(-count, 0))


def differ_positions(data: pairs.Dataset) -> int:
    """How many positions from the first difference on (the longest such tail over the batches)."""
    return max(batch.n_tokens - min(batch.first_difference, batch.n_tokens - 1) for batch in data.batches)


def _first_tokens(explorer, data: pairs.Dataset, positions) -> tuple[str, ...]:
    """The first pair's clean tokens at `positions` (from the end)."""
    batch = next(b for b in data.batches if 0 in b.indices)
    ids = batch.clean[batch.indices.index(0)].tolist()
    return tuple(explorer.tokenizer.decode([ids[p]]) for p in positions)


def every_edge(config) -> list[tuple]:
    return [(u, v, 0.0) for u, v in edge_module.every_edge(config)]


def find(
    explorer, data: pairs.Dataset, methods, steps: int = EAP_STEPS, positions=None, work=None, listed=None
) -> Circuit:
    """Run the chosen `methods` (METHODS) on the dataset; the clean and corrupted metrics always. The
    node sweep and AtP patch each head at every position at once, or at each of `positions` (from the
    end) alone. `work`: each method's and the curve's ("curve") share of the work, in any unit (as
    `app.limits.circuit_forwards` estimates it), for the progress a job is told (equal without). The
    graph per position reads the largest group of pairs of one length (`aligned`), `listed` the pairs
    as given (`engine.pairs.listed_pairs`; without, as the tokenizer decodes them)."""
    config = explorer.config
    shape = (config.n_layers, config.n_heads) + (() if positions is None else (len(positions),))
    nodes = head_nodes(config, positions)
    parts = [m for m in METHODS if m in methods] + ["curve"]
    work = {m: max(0.0, (work or {}).get(m, 0.0)) for m in parts}
    total = sum(work.values())
    shares = {m: work[m] / total if total else 1 / len(parts) for m in parts}
    exact = atp = ranked = None
    if "exact" in methods:
        with deadline.part(shares["exact"]):
            exact = node_module.patch_nodes(explorer, data, nodes).numpy().reshape(shape)
    if "atp" in methods:
        with deadline.part(shares["atp"]):
            atp = node_module.attribution_patching(explorer, data, nodes).numpy().reshape(shape)
    if "eap" in methods:
        with deadline.part(shares["eap"]):
            ranked = edge_module.edge_attribution(explorer, data, steps).edges
    graph = whole = None
    influence = graph_module.NODE_THRESHOLD
    if "graph" in methods:
        with deadline.part(shares["graph"]):
            chosen, chosen_pairs = aligned(data, listed)
            whole = graph_module.build(explorer, chosen, steps, chosen_pairs)
            graph, influence = readable(whole)
    everything = ranked if ranked is not None else every_edge(config)
    counts = sorted({round(share * len(everything)) for share in CURVE_SHARES})
    if ranked is None:
        counts = [0, len(everything)]
    with deadline.part(shares["curve"]):
        values = exact_circuits.faithfulness(explorer, data, everything, counts)
    curve = list(zip(counts, values, strict=True))
    return Circuit(
        metric=data.metric,
        clean=values[-1],
        corrupted=values[0],
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        exact=exact,
        atp=atp,
        edges=ranked,
        curve=curve if ranked is not None else [],
        positions=None if positions is None else tuple(positions),
        position_tokens=() if positions is None else _first_tokens(explorer, data, positions),
        graph=graph,
        graph_scored=0 if whole is None else len(whole),
        graph_whole=whole,
        graph_influence=influence,
    )


def readable(whole: graph_module.Graph) -> tuple[graph_module.Graph, float]:
    """The graph pruned to the writers carrying the default share of the influence, or a smaller share
    (by `INFLUENCE_STEP`) until it draws at most `READABLE_WRITERS` heads and MLPs; and that share."""
    share = graph_module.NODE_THRESHOLD
    while True:
        graph = whole.pruned(node_threshold=share)
        if len(graph.writers()) <= READABLE_WRITERS or share <= INFLUENCE_STEP:
            return graph, share
        share = round(share - INFLUENCE_STEP, 2)


def regraphed(circuit: Circuit, influence: float) -> Circuit:
    """The circuit with its graph per position pruned to the writers carrying `influence` of it."""
    if circuit.graph_whole is None:
        return circuit
    influence = min(1.0, max(INFLUENCE_STEP, round(float(influence), 2)))
    graph = circuit.graph_whole.pruned(node_threshold=influence)
    return replace(circuit, graph=graph, graph_influence=influence)


def aligned(data: pairs.Dataset, listed: list[dict] | None) -> tuple[pairs.Dataset, list[dict] | None]:
    """The pairs a graph per position reads: those of the length most pairs have (the first such
    length in the dataset on a tie), where positions line up; and those pairs as given (None: not given)."""
    batch = max(data.batches, key=lambda batch: (batch.size, -min(batch.indices)))
    chosen = None if listed is None else [listed[index] for index in sorted(batch.indices)]
    return pairs.Dataset([batch], data.metric), chosen


def position_graph(circuit: Circuit) -> Plot | None:
    """The graph per position, pruned (`views.attribution_graph`)."""
    if circuit.graph is None:
        return None
    g = circuit.graph
    n = g.n_pairs
    title = (
        f"The graph per position: {len(g.writers())} heads and MLPs carrying {circuit.graph_influence:.0%} "
        f"of its influence, {len(g):,} of {circuit.graph_scored:,} edges ({n} pair{'s' * (n != 1)} of "
        f"{g.n_tokens} tokens)"
    )
    return attribution_graph.graph_figure(g, title)


def summary(found: Circuit, n_pairs: int, methods, kept: int) -> str:
    """What a circuit reading found, in a line: the pairs and methods, the clean and corrupted metric,
    the edges scored and drawn, the pairs the graph per position read and what its pruning kept."""
    total = len(found.edges or ())
    said = (
        f"{n_pairs} pair{'s' * (n_pairs != 1)}, {', '.join(METHOD_NAMES[m] for m in methods)}: "
        f"clean {found.clean:.3g}, corrupted {found.corrupted:.3g}"
        + (f"; {total:,} edges scored, the graph shows the top {kept:,}." if total else ".")
    )
    if found.graph is not None:
        g = found.graph
        of = "every pair" if g.n_pairs == n_pairs else f"the {g.n_pairs} of {n_pairs} pairs of one length"
        said += (
            f" The graph per position reads {of} ({g.n_tokens} tokens: positions line up), pruned to "
            f"{len(g.writers())} heads and MLPs and {len(g):,} of its {found.graph_scored:,} edges."
        )
    if abs(found.span) < 1e-6:  # nothing to recover: every recovered fraction is undefined
        said += " The clean and corrupted runs give the same metric: corrupt the pairs differently."
    return said


def node_scores(circuit: Circuit) -> Plot | None:
    """Each head's recovered fraction: the exact sweep's and AtP's (as the estimate of the same
    patch) beside it, where they ran."""
    panels = {}
    if circuit.exact is not None:
        panels["exact"] = circuit.recovered(circuit.exact)
    if circuit.atp is not None:
        panels["AtP"] = circuit.recovered(circuit.atp + circuit.corrupted)
    if not panels:
        return None
    what = f"of {METRIC_NAMES[circuit.metric]}"
    if circuit.positions is None:
        return figures.node_scores_figure.plot(panels, what)
    return figures.node_position_scores_figure.plot(panels, what, circuit.positions, circuit.position_tokens)


def edge_count(circuit: Circuit, share: float) -> int:
    return max(1, round(share * len(circuit.edges or ())))


def graph(circuit: Circuit, kept: int) -> Plot | None:
    """The circuit of the `kept` strongest edges (EAP-IG) as a graph."""
    if not circuit.edges:
        return None
    top = circuit.edges[:kept]
    scores = np.array([score for _, _, score in top], dtype=np.float32)
    group = circuit.n_heads // circuit.n_kv_heads
    ups, downs = [u for u, _, _ in top], [d for _, d, _ in top]
    return figures.circuit_figure.plot(ups, downs, scores, circuit.n_layers, circuit.n_heads, group)


def curve(circuit: Circuit, kept: int) -> Plot | None:
    """The faithfulness curve, the slider's count marked."""
    if not circuit.curve:
        return None
    counts = np.array([count for count, _ in circuit.curve])
    recovered = np.array([circuit.recovered(value) for _, value in circuit.curve])
    return figures.faithfulness_curve_figure.plot(counts, recovered, len(circuit.edges or ()), kept)


class PairRow(NamedTuple):
    """One pair of a dataset as its table shows it."""

    clean: str
    corrupted: list[tuple[str, bool]]  # the corrupted prompt in pieces, each with whether it differs
    answer: str
    distractor: str


def pair_rows(chosen: prompt_sets.PromptSet) -> list[PairRow]:
    """The dataset's pairs, each corrupted prompt's words that differ from its clean prompt's marked."""
    columns = zip(chosen.clean, chosen.corrupted, chosen.answers, chosen.distractors, strict=True)
    return [PairRow(a, changed_words(a, b), answer, other) for a, b, answer, other in columns]


WORDS = re.compile(r"(\s+)")  # split keeping the whitespace between words as pieces of its own


def changed_words(clean: str, corrupted: str) -> list[tuple[str, bool]]:
    """`corrupted` in words and the whitespace between them, each with whether it differs from the
    piece of `clean` at its place: word by word where both have as many, else the part between their
    common start and end. Linear in the text."""
    pieces, theirs = WORDS.split(corrupted), WORDS.split(clean)
    if len(pieces) == len(theirs):
        marked = [(piece, piece != other) for piece, other in zip(pieces, theirs, strict=True)]
    else:
        start, shorter = 0, min(len(pieces), len(theirs))
        while start < shorter and pieces[start] == theirs[start]:
            start += 1
        end, their_end = len(pieces), len(theirs)
        while end > start and their_end > start and pieces[end - 1] == theirs[their_end - 1]:
            end, their_end = end - 1, their_end - 1
        marked = [(piece, start <= i < end) for i, piece in enumerate(pieces)]
    merged: list[tuple[str, bool]] = []  # neighbours marked alike joined into one piece
    for piece, changed in marked:
        if not piece:
            continue
        if merged and merged[-1][1] == changed:
            merged[-1] = (merged[-1][0] + piece, changed)
        else:
            merged.append((piece, changed))
    return merged


def node_name(node: tuple) -> str:
    return ".".join(str(part) for part in node)


def to_csv(circuit: Circuit, edge_rows: int) -> str:
    """The circuit as CSV: each head's scores (at each position, counted from the end: −1 the last,
    where asked), the first `edge_rows` edges, the curve; one table with a `section` column, so that a
    spreadsheet filters it."""
    out = io.StringIO()
    rows = csv.writer(out)
    rows.writerow(["section", "name", "to", "value", "recovered", "position_from_end"])
    rows.writerow(["metric", circuit.metric, "", "", "", ""])
    rows.writerow(["clean", "", "", f"{circuit.clean:.6g}", "1", ""])
    rows.writerow(["corrupted", "", "", f"{circuit.corrupted:.6g}", "0", ""])
    for name, values in (("exact", circuit.exact), ("atp", circuit.atp)):
        if values is None:
            continue
        as_metric = values if name == "exact" else values + circuit.corrupted
        for index, value in np.ndenumerate(as_metric):
            layer, head, *at = index
            position = "" if not at else str(circuit.positions[at[0]])
            recovered = f"{circuit.recovered(value):.6g}"
            rows.writerow([name, f"head {layer}.{head}", "", f"{value:.6g}", recovered, position])
    for up, down, score in (circuit.edges or [])[:edge_rows]:
        rows.writerow(["edge", node_name(up), node_name(down), f"{score:.6g}", "", ""])
    for count, value in circuit.curve:
        recovered = f"{circuit.recovered(value):.6g}"
        rows.writerow(["curve", f"{count} edges", "", f"{value:.6g}", recovered, ""])
    return out.getvalue()
