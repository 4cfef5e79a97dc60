"""Edits: a researcher's own interventions, written on the one forward through its taps.

    Edit("z", 23, head=3, position=-1, op="set", value=vec)     # a head's output before o_proj
    Edit("resid", 10, op="add", value=direction)                # the stream entering block 10
    Edit("mlp", 4, position=7, op="scale", value=0.0)           # what an MLP writes
    Edit("scores", 18, head=6, position=(40, 17), op="block")   # attention knockout (Geva et al. 2023)

Each tap names a tensor of the forward, and the region an edit selects in it (P: the positions selected):

    resid   [P, hidden]     the stream entering block `layer`; layer L: the final norm's input
    z       [H, P, d]       each head's output before o_proj (`head`: one of H, the region [P, d])
    q       [H, P, d]       q_proj's output, before QK-norm and RoPE
    k, v    [H_kv, P, d]    k_proj's and v_proj's, per kv head (`head`: a kv head)
    mlp     [P, hidden]     what the MLP writes
    scores  [H, Q, K]       scaled, −∞ outside the mask (a cell outside it stays −∞ after any edit);
                            `position` a (query, key) cell, a query (its row) or a list of them

Ops: `set`, `add` and `scale` by a value that broadcasts to the region (a number, or an array of the
region's shape or its last dims); `block`, on scores alone, sets the cells to −∞ before the softmax: the
fast path keeps SDPA and takes them into its mask; `fn`, a callable given the region (with the batch
dimension first) that returns its new value, for anything else. Score edits other than `block` make
their layer attend stage by stage (`engine.rows`), the others keep SDPA.

`position`: None (every position), an int, a list or a slice; negative ones count from the end of the
sequence the edits are read against (a run's tokens; a generation's prompt, where None also takes every
new position). Every edit is checked before any forward (`Edits.parse`): a bad one is refused with a
message, and nothing is applied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from explorer.engine.config import ModelConfig
from explorer.engine.edit import Edit
from explorer.engine.edit_writes import Resolved, edit_tap, knockout_tap
from explorer.engine.taps import Taps

TAPS = ("resid", "z", "q", "k", "v", "mlp", "scores")
OPS = ("set", "add", "scale", "block", "fn")


class Edits:
    """Edits checked against a model and a sequence, as the taps of a forward over some of its positions."""

    def __init__(self, resolved: list[Resolved], config: ModelConfig):
        self.resolved, self.config = resolved, config

    @classmethod
    def parse(cls, config: ModelConfig, edits: Sequence[Edit] | None, n_tokens: int, growing: bool = False):
        """Every edit checked (module doc) against a sequence of `n_tokens` positions (`growing`: a
        generation's prompt, new positions after it); None where there are none. A bad edit raises
        ValueError naming it."""
        if not edits:
            return None
        if isinstance(edits, Edit):
            edits = [edits]
        resolved = [_resolve(config, edit, n_tokens, growing) for edit in edits]
        _check_rows_left(config, resolved)
        return cls(resolved, config)

    @property
    def edits(self) -> list[Edit]:
        return [r.edit for r in self.resolved]

    def __str__(self) -> str:
        return "; ".join(str(edit) for edit in self.edits)

    def taps(self, positions: range) -> Taps:
        """The taps that write these edits on a forward over `positions` (consecutive, absolute)."""
        by_point: dict[str, dict[int, list[Resolved]]] = {}
        blocks: dict[int, list[Resolved]] = {}
        for r in self.resolved:
            if r.edit.op == "block":
                blocks.setdefault(r.edit.layer, []).append(r)
                continue
            name, layer = r.point
            by_point.setdefault(name, {}).setdefault(layer, []).append(r)
        fields: dict[str, Any] = {name: edit_tap(layers, positions) for name, layers in by_point.items()}
        if blocks:
            fields["knockout"] = knockout_tap(blocks, self.config.n_heads)
        if "scores" in by_point:
            fields["stagewise_layers"] = frozenset(by_point["scores"])
        return Taps(**fields)


def _resolve(config: ModelConfig, edit: Edit, n_tokens: int, growing: bool) -> Resolved:
    if not isinstance(edit, Edit):
        raise ValueError(f"edits are explorer.Edit(...), got {edit!r}")
    if edit.tap not in TAPS:
        raise ValueError(f"{edit}: unknown tap {edit.tap!r}; the taps are {', '.join(TAPS)}")
    if edit.op not in OPS:
        raise ValueError(f"{edit}: unknown op {edit.op!r}; the ops are {', '.join(OPS)}")
    if edit.op == "block" and edit.tap != "scores":
        raise ValueError(f"{edit}: block is an op on scores (attention knockout), not on {edit.tap}")
    last = config.n_layers if edit.tap == "resid" else config.n_layers - 1
    if isinstance(edit.layer, bool) or not isinstance(edit.layer, int) or not 0 <= edit.layer <= last:
        raise ValueError(f"{edit}: layer must be an integer in [0, {last}], got {edit.layer!r}")
    heads = {"z": config.n_heads, "q": config.n_heads, "scores": config.n_heads}
    heads |= {"k": config.n_kv_heads, "v": config.n_kv_heads}
    if edit.head is not None:
        if edit.tap not in heads:
            raise ValueError(f"{edit}: {edit.tap} has no heads; leave head out")
        count = heads[edit.tap]
        if isinstance(edit.head, bool) or not isinstance(edit.head, int) or not 0 <= edit.head < count:
            kind = "kv head" if edit.tap in ("k", "v") else "head"
            raise ValueError(f"{edit}: {kind} must be an integer in [0, {count - 1}], got {edit.head!r}")
    if edit.tap == "scores":
        positions = _cells(edit, n_tokens, growing)
    else:
        positions = _positions(edit, n_tokens, growing)
    if edit.op == "block" and (positions is None or any(key is None for _, key in positions)):
        raise ValueError(
            f"{edit}: block takes (query, key) cells: a whole row blocked leaves its softmax nothing"
        )
    return Resolved(edit, positions, _value(config, edit, positions, n_tokens, growing), config.n_layers)


def _index(edit: Edit, position, n_tokens: int, growing: bool, what: str = "position") -> int:
    if isinstance(position, bool) or not isinstance(position, int):
        raise ValueError(f"{edit}: a {what} is an integer, got {position!r}")
    absolute = position + n_tokens if position < 0 else position
    if absolute < 0 or (absolute >= n_tokens and not growing):
        raise ValueError(f"{edit}: {what} {position} is outside the sequence's {n_tokens} positions")
    return absolute


def _positions(edit: Edit, n_tokens: int, growing: bool) -> tuple[int, ...] | None:
    position = edit.position
    if position is None:
        return None
    if isinstance(position, slice):
        picked = tuple(range(n_tokens)[position])
    elif isinstance(position, (list, tuple, range)):
        picked = tuple(_index(edit, p, n_tokens, growing) for p in position)
    else:
        picked = (_index(edit, position, n_tokens, growing),)
    if not picked:
        raise ValueError(f"{edit}: its positions select none of the sequence's {n_tokens}")
    if len(set(picked)) != len(picked):
        raise ValueError(f"{edit}: a position is named twice")
    return picked


def _cells(edit: Edit, n_tokens: int, growing: bool) -> tuple | None:
    """(query, key) cells, key None for a whole row."""
    position = edit.position
    if position is None:
        return None
    named = position if isinstance(position, list) else [position]
    cells = []
    for cell in named:
        if isinstance(cell, tuple) and len(cell) == 2:
            query = _index(edit, cell[0], n_tokens, growing, "query")
            key = _index(edit, cell[1], n_tokens, growing, "key")
            if key > query:
                raise ValueError(f"{edit}: key {key} comes after query {query}, which never sees it")
            cells.append((query, key))
        else:
            cells.append((_index(edit, cell, n_tokens, growing, "query"), None))
    if len(set(cells)) != len(cells):
        raise ValueError(f"{edit}: a cell is named twice")
    return tuple(cells)


def _value(config: ModelConfig, edit: Edit, positions, n_tokens: int, growing: bool):
    """The edit's value checked: a callable for fn, nothing for block, a number for scores, else a
    float32 tensor shaped [(H,) P or 1, last] for the region it writes."""
    if edit.op == "block":
        if edit.value is not None:
            raise ValueError(f"{edit}: block takes no value")
        return None
    if edit.op == "fn":
        if not callable(edit.value):
            raise ValueError(f"{edit}: fn takes a callable value (the region -> its new value)")
        return edit.value
    if edit.value is None:
        raise ValueError(f"{edit}: {edit.op} needs a value")
    try:
        value = torch.as_tensor(edit.value).detach().to("cpu", torch.float32)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"{edit}: its value is no number or array ({error})") from None
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{edit}: its value holds NaN or infinite numbers")
    if edit.tap == "scores":
        if value.numel() != 1:
            raise ValueError(f"{edit}: a score edit's value is one number, got shape {tuple(value.shape)}")
        return float(value)
    last = config.hidden_size if edit.tap in ("resid", "mlp") else config.head_dim
    count = None if edit.head is not None or edit.tap in ("resid", "mlp") else _heads_of(config, edit.tap)
    selected = len(positions) if positions is not None else n_tokens
    region = (*(() if count is None else (count,)), selected, last)
    if value.dim() == 0:
        value = value.reshape(1)
    if value.dim() == 1 or (count is not None and value.dim() == 2 and value.shape[0] == count):
        value = value.unsqueeze(-2)  # no position dimension: the same at every position
    try:
        fits = torch.broadcast_shapes(value.shape, region) == region and value.dim() <= len(region)
    except RuntimeError:
        fits = False
    if not fits:
        names = (
            ("heads, " if count else "") + "positions, " + ("hidden" if edit.tap in ("resid", "mlp") else "d")
        )
        raise ValueError(
            f"{edit}: a value of shape {edit_shape(edit.value)} does not fit the region it writes, "
            f"[{' × '.join(map(str, region))}] ({names})"
        )
    if growing and positions is None and value.shape[-2] > 1:
        raise ValueError(f"{edit}: a generation's new positions take a value without a position dimension")
    return value


def edit_shape(value) -> tuple[int, ...]:
    return tuple(getattr(value, "shape", torch.as_tensor(value).shape))


def _heads_of(config: ModelConfig, tap: str) -> int:
    return config.n_kv_heads if tap in ("k", "v") else config.n_heads


def _check_rows_left(config: ModelConfig, resolved: list[Resolved]) -> None:
    """No query left with every key it sees blocked (its softmax would have nothing)."""
    blocked: dict[tuple[int, int, int], set[int]] = {}
    for r in resolved:
        if r.edit.op != "block":
            continue
        heads = range(config.n_heads) if r.edit.head is None else [r.edit.head]
        for query, key in r.positions:
            for head in heads:
                blocked.setdefault((r.edit.layer, head, query), set()).add(key)
    for (layer, head, query), keys in blocked.items():
        window = config.window(layer)
        seen = set(range(query + 1 if window is None else min(window, query + 1)))
        seen = {query - j for j in seen}
        if seen <= keys:
            raise ValueError(
                f"block at layer {layer} head {head}: every key query {query} sees is blocked, which leaves "
                "its softmax nothing; keep at least one"
            )


@dataclass(frozen=True)
class Knockout:
    """Attention cells knocked out, each (layer, head, query, key), sorted and each once: a value a run
    is kept under (the app's workspace), read as the edits that block them."""

    cells: tuple[tuple[int, int, int, int], ...]

    @classmethod
    def adding(cls, knockout: Knockout | None, cell: tuple[int, int, int, int]) -> Knockout:
        """`knockout`'s cells (none where None) and `cell`."""
        cells = set(knockout.cells if knockout else ()) | {tuple(int(value) for value in cell)}
        return cls(tuple(sorted(cells)))

    @classmethod
    def read(cls, spelled: str) -> Knockout:
        """The knockout `spelled` names ("2.3:14-9,2.3:14-8": layer.head:query-key, as a link carries
        it); ValueError where it is not that."""
        cells = []
        for part in spelled.split(","):
            found = re.fullmatch(r"\s*(\d{1,6})\.(\d{1,6}):(\d{1,9})-(\d{1,9})\s*", part)
            if found is None:
                raise ValueError(f"a knocked-out cell is layer.head:query-key, e.g. 2.3:14-9; got {part!r}")
            cells.append(tuple(int(value) for value in found.groups()))
        return cls(tuple(sorted(set(cells))))

    def spelled(self) -> str:
        """The cells as `read` takes them."""
        return ",".join(f"{layer}.{head}:{query}-{key}" for layer, head, query, key in self.cells)

    def run_options(self) -> dict:
        """`Explorer.run`'s keywords that make a run knock these cells out."""
        return {"edits": self.edits()}

    def edits(self) -> list[Edit]:
        return [
            Edit("scores", layer, head=head, position=(query, key), op="block")
            for layer, head, query, key in self.cells
        ]

    def __str__(self) -> str:
        cells = ", ".join(f"{layer}.{head} at {query} → {key}" for layer, head, query, key in self.cells)
        return f"knockout of {cells}"
