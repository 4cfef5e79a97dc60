"""A position-resolved attribution graph: every edge of `engine.edges` at each token position, scored by
EAP-IG from the same passes as `edge_attribution` (summed over positions, the scores are its scores),
pruned to what carries most of the influence, and written to JSON to draw or share.

Nodes carry their position last: writers ("embedding", p), ("head", l, h, p), ("mlp", l, p); readers
("q", l, h, p), ("k", l, kv, p), ("v", l, kv, p), ("mlp", l, p), ("logits", p), the logits read at the
last position only. An edge joins a writer and a reader at one position; a head at query position i
reads its keys and values at every j ≤ i, which `attention` (the first clean prompt's maps) joins.

Influence: an edge's |score|; a node's, the sum of |score| over the edges it writes along (a writer) or
reads along (a reader). `Graph.pruned` follows circuit-tracer's cumulative pruning (Ameisen et al.
2025): the writers that carry `node_threshold` of all writers' influence, then of the edges between
them (into readers of the kept heads and MLPs, and the logits) those that carry `edge_threshold` of
theirs, then, until nothing changes, writers no kept edge leaves and edges into readers whose head
or MLP went.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

import torch

from explorer.engine import edges as edge_module
from explorer.engine import pairs as pair_module

FORMAT = "attention-explorer/graph"
VERSION = 1
NODE_THRESHOLD = 0.6  # of the writers' influence, what `pruned` keeps by default
EDGE_THRESHOLD = 0.98  # of the kept writers' edges' influence (circuit-tracer's default)


class GraphNode(NamedTuple):
    node: tuple  # position last
    role: str  # "writer" or "reader" (an MLP is both: what it writes, and what it reads)
    influence: float  # Σ |score| of the edges it writes along, or reads along


@dataclass(frozen=True, eq=False)
class Graph:
    """Positional edges and their EAP-IG scores, largest |score| first (module doc)."""

    tokens: list[str]  # [N] the first clean prompt's tokens: the positions
    upstream: list[tuple]  # [U] writers without their positions, in the stream's order
    downstream: list[tuple]  # [V] readers without their positions, in the forward's order
    rows: torch.Tensor  # [E] long: each edge's writer, an index into `upstream`
    columns: torch.Tensor  # [E] long: its reader, an index into `downstream`
    positions: torch.Tensor  # [E] long
    scores: torch.Tensor  # [E] float32
    attention: torch.Tensor  # [L, H, N, N] float32 the first clean prompt's attention maps
    metric: str = "logit_diff"
    steps: int = 5
    clean: float = 0.0  # the metric of the clean prompts, averaged over the pairs
    corrupted: float = 0.0  # and of the corrupted ones
    pairs: list[dict] = field(default_factory=list)  # {clean, corrupted, answer, distractor} each
    model: str = ""

    def __post_init__(self):
        n = len(self.rows)
        if not len(self.columns) == len(self.positions) == len(self.scores) == n:
            raise ValueError("a graph's edges need a writer, a reader, a position and a score each")

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    def __len__(self) -> int:
        return len(self.scores)

    @cached_property
    def edges(self) -> list[tuple[tuple, tuple, float]]:
        """Every edge as (writer, reader, score), positions last, largest |score| first."""
        rows, columns, positions = self.rows.tolist(), self.columns.tolist(), self.positions.tolist()
        return [
            (self.upstream[u] + (p,), self.downstream[v] + (p,), s)
            for u, v, p, s in zip(rows, columns, positions, self.scores.tolist(), strict=True)
        ]

    @cached_property
    def nodes(self) -> list[GraphNode]:
        """Every writer and reader with an edge, with its influence, largest first."""
        found = []
        for role, names, index in (
            ("writer", self.upstream, self.rows),
            ("reader", self.downstream, self.columns),
        ):
            key, size = index * self.n_tokens + self.positions, len(names) * self.n_tokens
            influence = _summed(key, self.scores.abs(), size)
            present = _summed(key, torch.ones(len(key)), size) > 0
            for k in present.nonzero()[:, 0].tolist():
                node = names[k // self.n_tokens] + (k % self.n_tokens,)
                found.append(GraphNode(node, role, float(influence[k])))
        return sorted(found, key=lambda found_node: -found_node.influence)

    def writers(self, kinds=("head", "mlp")) -> list[tuple]:
        """The writers of these kinds with an edge, positions last."""
        keys = set(zip(self.rows.tolist(), self.positions.tolist(), strict=True))
        return sorted(self.upstream[u] + (p,) for u, p in keys if self.upstream[u][0] in kinds)

    def label(self, node: tuple) -> str:
        """A node's name as the page writes it: `23.3`, `MLP 12`, `emb "Mary"`, `logits`, `k 18.2`."""
        kind = node[0]
        if kind == "embedding":
            return f"emb {json.dumps(self.tokens[node[-1]], ensure_ascii=False)}"
        if kind == "logits":
            return "logits"
        if kind == "head":
            return f"{node[1]}.{node[2]}"
        if kind == "mlp":
            return f"MLP {node[1]}"
        return f"{kind} {node[1]}.{node[2]}"

    def pruned(self, node_threshold: float = NODE_THRESHOLD, edge_threshold: float = EDGE_THRESHOLD) -> Graph:
        """The edges that carry most of the influence (module doc), as a smaller Graph."""
        for name, value in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
                raise ValueError(f"{name} is a share of the influence, above 0 and at most 1, got {value!r}")
        n, influence = self.n_tokens, self.scores.abs()
        writer = self.rows * n + self.positions  # [E] each edge's writer at its position
        by_writer = _summed(writer, influence, len(self.upstream) * n)
        kept_writers = _top_share(by_writer, node_threshold) & (by_writer > 0)
        owner = self._owners()  # [V, W] bool: a reader's head or MLP among the writers (logits: none)
        keep = kept_writers[writer] & self._owned(kept_writers, owner)
        keep &= _top_share_of(influence, keep, edge_threshold)
        while True:
            alive = _summed(writer[keep], torch.ones(int(keep.sum())), len(kept_writers)) > 0
            still = keep & alive[writer] & self._owned(alive, owner)
            if torch.equal(still, keep):
                break
            keep = still
        index = keep.nonzero()[:, 0]
        return replace(
            self,
            rows=self.rows[index],
            columns=self.columns[index],
            positions=self.positions[index],
            scores=self.scores[index],
        )

    def _owners(self) -> dict[int, list[int]]:
        """Each reader's writers that read through it: a q head's own head, a k or v head's query heads
        (its group), an MLP's input its MLP; the logits none."""
        up = {node: i for i, node in enumerate(self.upstream)}
        heads = sum(1 for node in self.downstream if node[:2] == ("q", 0))
        group = heads // sum(1 for node in self.downstream if node[:2] == ("k", 0))
        found = {}
        for v, (kind, *where) in enumerate(self.downstream):
            if kind == "q":
                found[v] = [up["head", where[0], where[1]]]
            elif kind in ("k", "v"):
                found[v] = [up["head", where[0], h] for h in range(where[1] * group, (where[1] + 1) * group)]
            elif kind == "mlp":
                found[v] = [up["mlp", where[0]]]
        return found

    def _owned(self, kept_writers: torch.Tensor, owners: dict[int, list[int]]) -> torch.Tensor:
        """Whether each edge's reader feeds a kept writer: its q head or MLP at the edge's position, a
        k or v head at a query position from the edge's on; the logits always.  # -> [E] bool"""
        n = self.n_tokens
        kept = kept_writers.view(-1, n)  # [U, N]
        later = kept.flip(1).cummax(1).values.flip(1)  # [U, N] a kept writer at this position or after
        fed = torch.ones(len(self.downstream), n, dtype=torch.bool)  # [V, N]
        for v, writers in owners.items():
            source = later if self.downstream[v][0] in ("k", "v") else kept
            fed[v] = source[writers].any(0)
        return fed[self.columns, self.positions]

    def to_json(self) -> str:
        """The graph as versioned JSON: what the page draws and what a person shares."""
        heads = sorted({self.upstream[u][1:3] for u in self.rows.tolist() if self.upstream[u][0] == "head"})
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "model": self.model,
                "metric": self.metric,
                "steps": self.steps,
                "clean": self.clean,
                "corrupted": self.corrupted,
                "pairs": self.pairs,
                "tokens": self.tokens,
                "upstream": [list(node) for node in self.upstream],
                "downstream": [list(node) for node in self.downstream],
                "edges": {
                    "upstream": self.rows.tolist(),
                    "downstream": self.columns.tolist(),
                    "position": self.positions.tolist(),
                    "score": self.scores.tolist(),
                },
                "attention_shape": list(self.attention.shape),
                "attention": {
                    f"{layer}.{head}": self.attention[layer, head].tolist() for layer, head in heads
                },
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> Graph:
        """A graph written by `to_json`; another format or a later version is refused by name."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise ValueError(f"this is not a graph's JSON: {error}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"this JSON is not an Attention Explorer graph (its format is not {FORMAT!r})")
        if data.get("version") != VERSION:
            raise ValueError(
                f"graph version {data.get('version')!r}: this Attention Explorer reads version {VERSION}"
            )
        try:
            edges = data["edges"]
            attention = torch.zeros(data["attention_shape"])
            for key, rows in data["attention"].items():
                layer, head = (int(part) for part in key.split("."))
                attention[layer, head] = torch.tensor(rows)
            graph = cls(
                tokens=[str(token) for token in data["tokens"]],
                upstream=[tuple(node) for node in data["upstream"]],
                downstream=[tuple(node) for node in data["downstream"]],
                rows=torch.tensor(edges["upstream"], dtype=torch.long),
                columns=torch.tensor(edges["downstream"], dtype=torch.long),
                positions=torch.tensor(edges["position"], dtype=torch.long),
                scores=torch.tensor(edges["score"], dtype=torch.float32),
                attention=attention,
                metric=str(data["metric"]),
                steps=int(data["steps"]),
                clean=float(data["clean"]),
                corrupted=float(data["corrupted"]),
                pairs=list(data["pairs"]),
                model=str(data["model"]),
            )
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
            raise ValueError(f"this graph's JSON is damaged: {type(error).__name__}: {error}") from None
        for index, names in (
            (graph.rows, graph.upstream),
            (graph.columns, graph.downstream),
            (graph.positions, graph.tokens),
        ):
            if len(index) and not 0 <= int(index.min()) <= int(index.max()) < len(names):
                raise ValueError("this graph's JSON is damaged: an edge names a node or position it lacks")
        return graph


def build(explorer, data: pair_module.Dataset, steps: int, listed: list[dict] | None = None) -> Graph:
    """The graph of a dataset of pairs of one length (`listed`: the pairs as given, one dict each, in
    the dataset's order; without, as the tokenizer decodes them): EAP-IG per position, the first clean
    prompt's attention maps, the metric of the clean and the corrupted prompts."""
    pair_module.require_one_length(data)
    baselines: dict = {}
    scores = edge_module.edge_scores(explorer, data, steps, positional=True, baselines=baselines)
    (batch,) = data.batches
    listed = listed or _decoded(explorer.tokenizer, batch)
    run = explorer.run(ids=batch.clean[batch.indices.index(min(batch.indices))].tolist())
    maps = [run.attention(layer, remember=False).probs for layer in range(explorer.config.n_layers)]
    return from_scores(
        scores,
        explorer.config,
        run.tokens,
        torch.stack(maps),  # [L, H, N, N]
        metric=data.metric,
        steps=steps,
        clean=baselines["clean"],
        corrupted=baselines["corrupted"],
        pairs=listed,
        model=explorer.name,
    )


def _decoded(tokenizer, batch: pair_module.Batch) -> list[dict]:
    """A batch's pairs as the tokenizer writes them, in the dataset's order."""

    def text(ids) -> str | None:
        return None if ids is None else tokenizer.decode(ids.tolist() if ids.dim() else [int(ids)])

    rows = sorted(range(batch.size), key=lambda row: batch.indices[row])
    others = [None] * batch.size if batch.distractors is None else batch.distractors
    return [
        dict(
            clean=text(batch.clean[r]),
            corrupted=text(batch.corrupted[r]),
            answer=text(batch.answers[r]),
            distractor=text(others[r]),
        )
        for r in rows
    ]


def from_scores(scores: torch.Tensor, config, tokens: list[str], attention: torch.Tensor, **fields) -> Graph:
    """A graph of every positional edge from EAP-IG's [U, V, N] scores (`edges.edge_scores`)."""
    n = len(tokens)
    valid = edge_module.valid_positional(config, n)
    rows, columns, positions = valid.nonzero(as_tuple=True)
    values = scores[rows, columns, positions]
    order = values.abs().argsort(descending=True, stable=True)
    return Graph(
        tokens=tokens,
        upstream=edge_module.upstream_nodes(config),
        downstream=edge_module.downstream_nodes(config),
        rows=rows[order],
        columns=columns[order],
        positions=positions[order],
        scores=values[order].float(),
        attention=attention,
        **fields,
    )


def _summed(index: torch.Tensor, values: torch.Tensor, size: int) -> torch.Tensor:
    """values summed by index.  # [E], [E] -> [size]"""
    return torch.zeros(size, dtype=values.dtype).index_add_(0, index, values)


def _top_share(values: torch.Tensor, share: float) -> torch.Tensor:
    """The largest values that together reach `share` of their sum (the one that crosses it included).
    # [K] non-negative -> [K] bool"""
    order = values.argsort(descending=True, stable=True)
    cumulative = values[order].cumsum(0)
    total = float(cumulative[-1]) if len(values) else 0.0
    if total <= 0:
        return torch.zeros_like(values, dtype=torch.bool)
    count = int((cumulative < share * total).sum()) + 1
    kept = torch.zeros_like(values, dtype=torch.bool)
    kept[order[: min(count, len(values))]] = True
    return kept


def _top_share_of(values: torch.Tensor, among: torch.Tensor, share: float) -> torch.Tensor:
    """`_top_share` of the values where `among` holds.  # [E], [E] bool -> [E] bool"""
    kept = torch.zeros_like(among)
    where = among.nonzero()[:, 0]
    kept[where] = _top_share(values[where], share)
    return kept
