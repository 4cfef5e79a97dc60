"""How edits (`explorer.engine.edits`) write on a forward: a tap for each point of the stream that
copies the tensor it is given and writes each edit of that layer on its region, in the order given; and
the knockout's mask of blocked cells."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from explorer.engine.edit import Edit

POINT = {"z": "heads", "q": "q", "k": "k", "v": "v", "mlp": "mlp_output", "scores": "scores"}


@dataclass(frozen=True, eq=False)
class Resolved:
    """An edit checked against a model and a sequence: its positions (or cells) absolute."""

    edit: Edit
    positions: tuple | None  # absolute positions; scores: (query, key or None) cells; None: every one
    value: torch.Tensor | float | Callable | None  # float32 CPU tensor [(H,) P or 1, last] for tensors
    n_layers: int

    @property
    def point(self) -> tuple[str, int]:
        """The `Taps` field and the layer it rides (the final norm's input: the last block's output)."""
        edit = self.edit
        if edit.tap != "resid":
            return POINT[edit.tap], edit.layer
        return ("block_input", edit.layer) if edit.layer < self.n_layers else ("block_output", edit.layer - 1)


def edit_tap(layers: dict[int, list[Resolved]], positions: range):
    """A tap writing each layer's edits, in the order given, on a forward over `positions`."""

    def tap(layer: int, value: torch.Tensor) -> torch.Tensor | None:
        if layer not in layers:
            return None
        value = value.clone()
        for r in layers[layer]:
            if r.edit.tap == "scores":
                _write_scores(r, value, positions)
            else:
                _write(r, value, positions)
        return value

    return tap


def _write(r: Resolved, tensor: torch.Tensor, positions: range) -> None:
    """In place: the edit on its region of a tap's tensor [B, (H,) M, last], rows at `positions`."""
    edit = r.edit
    view = tensor if edit.head is None else tensor[:, edit.head]  # [B, (H,) M, last]
    positions = _rows(positions, view.shape[-2])
    if r.positions is None:
        local = list(range(len(positions)))
        rows = list(positions)  # the value's rows: absolute positions
    else:
        picked = [(j, p) for j, p in enumerate(r.positions) if p in positions]
        local, rows = [p - positions.start for _, p in picked], [j for j, _ in picked]
    if not local:
        return
    index = torch.tensor(local, device=tensor.device)
    region = view.index_select(-2, index)  # [B, (H,) p, last]
    if edit.op == "fn":
        new = _called(edit, region)
    else:
        value = r.value if r.value.shape[-2] == 1 else r.value[..., rows, :]
        new = _applied(edit.op, region, value.to(tensor.device, tensor.dtype))
    view.index_copy_(-2, index, new.to(tensor.dtype))


def _write_scores(r: Resolved, scores: torch.Tensor, positions: range) -> None:
    """In place: the edit on its cells of a layer's masked scores [B, H, R, K], queries at `positions`;
    a cell the mask forbids stays −∞."""
    edit = r.edit
    view = scores if edit.head is None else scores[:, edit.head : edit.head + 1]  # [B, h, R, K]
    positions = _rows(positions, view.shape[-2])
    if r.positions is None:
        cells = [(slice(None), slice(None))]
    else:
        cells = [
            (query - positions.start, slice(None) if key is None else key)
            for query, key in r.positions
            if query in positions
        ]
    for row, key in cells:
        region = view[:, :, row, key]
        new = _called(edit, region.clone()) if edit.op == "fn" else _applied(edit.op, region, r.value)
        view[:, :, row, key] = torch.where(torch.isneginf(region), region, new.to(region.dtype))


def _rows(positions: range, count: int) -> range:
    """Where a tap's `count` rows stand: every position of the forward, or, where it holds fewer, the
    last ones (a forward that computes its last position alone from the queries on)."""
    return positions if count == len(positions) else range(positions.stop - count, positions.stop)


def _applied(op: str, region: torch.Tensor, value: torch.Tensor | float) -> torch.Tensor:
    """The region after set, add or scale by a value that broadcasts to it."""
    if op == "set":
        return torch.zeros_like(region) + value
    return region + value if op == "add" else region * value


def _called(edit: Edit, region: torch.Tensor) -> torch.Tensor:
    """The region as an fn edit returns it, checked to keep its shape."""
    new = edit.value(region)
    if not isinstance(new, torch.Tensor) or new.shape != region.shape:
        raise ValueError(f"{edit}: fn returned {_described(new)} for a region of shape {tuple(region.shape)}")
    return new


def knockout_tap(blocks: dict[int, list[Resolved]], n_heads: int):
    """A `Taps.knockout` blocking each layer's cells (the cells of queries a forward computes)."""

    def knockout(layer: int, queries: torch.Tensor, n_keys: int) -> torch.Tensor | None:
        if layer not in blocks:
            return None
        row_of = {int(q): i for i, q in enumerate(queries.tolist())}
        blocked = torch.zeros(n_heads, len(row_of), n_keys, dtype=torch.bool, device=queries.device)
        for r in blocks[layer]:
            heads = slice(None) if r.edit.head is None else r.edit.head
            for query, key in r.positions:
                if query in row_of and key < n_keys:
                    blocked[heads, row_of[query], key] = True
        return blocked

    return knockout


def _described(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"{type(value).__name__}"
