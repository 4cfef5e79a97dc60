"""One edit of one tap of the forward: what `explorer.Edit(...)` makes (`explorer.engine.edits` checks
and applies it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Edit:
    """One edit of one tap: the taps, ops and positions are `explorer.engine.edits`' doc."""

    tap: str
    layer: int
    head: int | None = None
    position: Any = None  # None, an int, a list, a slice; for scores (query, key) cells or query rows
    op: str = "set"
    value: Any = None  # a number or an array ([..., d] or the region's shape); a callable for "fn"

    def __str__(self) -> str:
        where = "" if self.head is None else f" head {self.head}"
        at = "" if self.position is None else f" at {self.position!r}"
        return f"{self.op} {self.tap} of layer {self.layer}{where}{at}"
