"""A positional attribution graph (`explorer.engine.graph.Graph`) laid out over the prompt for its
figure (`explorer.figures.attribution_graph`), and its heads ranked.

Where each node sits: y its layer (a head, an MLP and a kv head's k or v input on their layer's line,
the embedding under layer 0, the logits over the last); x its position, the nodes of one layer at one
position side by side, each as wide as its label. x is in pixels at the figure's least width: a
position's column is as wide as its most crowded layer's labels, or its token where it holds no node,
so no two labels meet; a figure wider than its card scrolls sideways. An edge runs from its
writer to what reads it: a q input to its head, an MLP's input to the MLP, a k or v input to that kv
head's input node; the input node reaches each kept head of its group at a later query position
through an attention edge, where the clean run's weight is at least `MIN_ATTENTION`.
"""

from __future__ import annotations

from explorer.engine.graph import Graph
from explorer.figures.attribution_graph import attribution_graph_figure
from explorer.figures.common import quoted_token, token_label
from explorer.figures.plot import Plot

MIN_ATTENTION = 0.05  # the weight under which an attention edge is not drawn
EMBEDDING_Y = -1.0  # every other node sits at its layer (the logits at L)
KIND_ORDER = {"embedding": 0, "kv": 1, "head": 2, "mlp": 3, "logits": 4}  # left to right in a row
CHAR_PX = 6.0  # the width of a label's character at the figure's font size (10 px), DejaVu Sans's widest
NODE_PX = 20  # the widest marker, and so the least room of a node
GAP_PX = 5  # between two nodes' labels, and at either side of a column
TICK_CHAR_PX = 7.2  # a character of a token on the x axis (12 px)


def graph_figure(g: Graph, title: str | None = None, min_attention: float = MIN_ATTENTION) -> Plot:
    """The graph's figure (module doc)."""
    n_layers = int(g.attention.shape[0])
    group = int(g.attention.shape[1]) // max(1, sum(1 for node in g.downstream if node[:2] == ("k", 0)))
    named: dict[tuple, dict] = {}  # each drawn node by its key: (kind, layer, head or kv, position)

    def node(kind: str, layer: int, index: int, position: int) -> dict:
        key = (kind, layer, index, position)
        if key not in named:
            named[key] = dict(kind=kind, layer=layer, index=index, position=position, influence=0.0)
        return named[key]

    def writer(u: tuple) -> dict:
        kind, *where = u
        if kind == "embedding":
            return node("embedding", -1, -1, where[-1])
        if kind == "head":
            return node("head", where[0], where[1], where[2])
        return node("mlp", where[0], -1, where[1])

    def reader(v: tuple) -> dict:
        kind, *where = v
        if kind == "logits":
            return node("logits", n_layers, -1, where[-1])
        if kind == "q":
            return node("head", where[0], where[1], where[2])
        if kind == "mlp":
            return node("mlp", where[0], -1, where[1])
        return node("kv", where[0], where[1], where[2])

    joined = []
    for u, v, score in g.edges:
        source, target = writer(u), reader(v)
        source["influence"] += abs(score)
        target["influence"] += abs(score)
        joined.append((source, target, v[0], score, u, v))
    kv_reads = {}  # (layer, kv, key position) -> the k/v reads drawn there
    for _, target, kind, _, _, _ in joined:
        if target["kind"] == "kv":
            kv_reads.setdefault((target["layer"], target["index"], target["position"]), set()).add(kind)
    heads = [n for n in named.values() if n["kind"] == "head"]
    attention = []
    for (layer, kv, key), _ in kv_reads.items():
        for head_node in heads:
            if (
                head_node["layer"] != layer
                or head_node["index"] // group != kv
                or head_node["position"] < key
            ):
                continue
            weight = float(g.attention[layer, head_node["index"], head_node["position"], key])
            if weight >= min_attention:
                attention.append((named["kv", layer, kv, key], head_node, weight))
    centres, width = _place(list(named.values()), g.tokens)
    index = {id(n): i for i, n in enumerate(named.values())}  # a node's place in the node trace
    tokens = g.tokens
    nodes = [
        dict(
            x=n["x"],
            y=n["y"],
            label=_label(n, tokens),
            kind=n["kind"],
            influence=n["influence"],
            hover=_hover(n, tokens, kv_reads),
            layer=n["layer"] if n["kind"] == "head" else -1,
            head=n["index"] if n["kind"] == "head" else -1,
        )
        for n in named.values()
    ]
    edges = [
        dict(
            x0=source["x"],
            y0=source["y"],
            x1=target["x"],
            y1=target["y"],
            source=index[id(source)],
            target=index[id(target)],
            reader=kind,
            score=score,
            hover=f"{g.label(u)} → {g.label(v)} at {v[-1]} {quoted_token(tokens[v[-1]])}: score {score:+.3g}",
        )
        for source, target, kind, score, u, v in joined
    ]
    drawn = [
        dict(
            x0=port["x"],
            y0=port["y"],
            x1=head_node["x"],
            y1=head_node["y"],
            source=index[id(port)],
            target=index[id(head_node)],
            weight=weight,
            layer=head_node["layer"],
            head=head_node["index"],
            query=head_node["position"],
            key=port["position"],
            hover=(
                f"{head_node['layer']}.{head_node['index']} at {head_node['position']} "
                f"{quoted_token(tokens[head_node['position']])} looks at {port['position']} "
                f"{quoted_token(tokens[port['position']])}: weight {weight:.2f}<br>click: why this score"
            ),
        )
        for port, head_node, weight in attention
    ]
    writers = sum(1 for n in named.values() if n["kind"] in ("head", "mlp"))
    title = title or f"The attribution graph: {writers} heads and MLPs, {len(g):,} edges, by token position"
    return attribution_graph_figure.plot(list(tokens), centres, width, n_layers, nodes, edges, drawn, title)


def _place(nodes: list[dict], tokens: list[str]) -> tuple[list[float], float]:
    """Each node's x and y (module doc); the centre of each position's column, and their width (px)."""
    rows: dict[tuple, list[dict]] = {}
    for n in nodes:
        n["y"] = EMBEDDING_Y if n["kind"] == "embedding" else float(n["layer"])
        n["room"] = max(NODE_PX, CHAR_PX * len(_label(n, tokens))) + GAP_PX
        rows.setdefault((n["position"], n["y"]), []).append(n)
    widths = [TICK_CHAR_PX * len(token_label(token)) + GAP_PX for token in tokens]
    for (position, _), members in rows.items():
        widths[position] = max(widths[position], sum(n["room"] for n in members) + GAP_PX)
    starts = [sum(widths[:p]) for p in range(len(tokens))]
    for (position, _), members in rows.items():
        members.sort(key=lambda n: (KIND_ORDER[n["kind"]], n["index"]))
        x = starts[position] + (widths[position] - sum(n["room"] for n in members)) / 2
        for n in members:
            n["x"] = x + n["room"] / 2
            x += n["room"]
    return [start + width / 2 for start, width in zip(starts, widths, strict=True)], sum(widths)


def _label(n: dict, tokens: list[str]) -> str:
    kind = n["kind"]
    if kind == "embedding":
        return f"emb {quoted_token(tokens[n['position']])}"
    if kind == "logits":
        return "logits"
    if kind == "mlp":
        return f"MLP {n['layer']}"
    if kind == "kv":
        return f"kv {n['layer']}.{n['index']}"
    return f"{n['layer']}.{n['index']}"


def _hover(n: dict, tokens: list[str], kv_reads: dict) -> str:
    where = f"at {n['position']} {quoted_token(tokens[n['position']])}"
    reads = " and ".join(sorted(kv_reads.get((n["layer"], n["index"], n["position"]), ())))
    name = {
        "embedding": "the embedding",
        "logits": "the logits",
        "mlp": f"MLP {n['layer']}",
        "head": f"head {n['layer']}.{n['index']}",
        "kv": f"the {reads} input of kv head {n['layer']}.{n['index']}",
    }[n["kind"]]
    click = "click: pin its paths, again: open it" if n["kind"] == "head" else "click: pin its paths"
    return f"{name} {where}<br>influence {n['influence']:.3g}<br>{click}"


def ranked_heads(g: Graph, count: int = 12) -> list[tuple[int, int, float]]:
    """The heads by their edges' summed score (every position, every reader), largest |sum| first, the
    sign kept: [(layer, head, score)]."""
    totals: dict[tuple[int, int], float] = {}
    for u, _, score in g.edges:
        if u[0] == "head":
            totals[u[1], u[2]] = totals.get((u[1], u[2]), 0.0) + score
    ranked = sorted(totals.items(), key=lambda item: -abs(item[1]))[:count]
    return [(layer, head, total) for (layer, head), total in ranked]
