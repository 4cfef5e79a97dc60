"""What frames a head's thumbnail in the all-heads figure: its frame in the kv group's colour, and its
first and last keys under it."""

from __future__ import annotations

from explorer.engine.tokens import printable
from explorer.figures.common import token_label

FRAME_WIDTH = 1.5  # px, a thumbnail's frame
FRAME_GAP = 0.004  # of the plot's width, between a thumbnail's cells and its frame (4.7 px at 1,400)
FRAME_GAP_PX = 4  # the same gap above and below
END_LABEL_CHARS = 10  # of a first or last token under a thumbnail (hover names every one whole)


def end_keys(tokens: list[str], x_domain: list[float], bottom: float, plot_height: int) -> list[dict]:
    """A thumbnail's first and last keys under its frame, at its left and right edges (each cut to
    END_LABEL_CHARS: hover names every key whole)."""
    y = bottom - (FRAME_GAP_PX + FRAME_WIDTH + 2) / plot_height
    return [
        dict(
            text=token_label(cut(printable(tokens[i]), END_LABEL_CHARS)),
            x=x,
            y=y,
            xref="paper",
            yref="paper",
            xanchor=side,
            yanchor="top",
            showarrow=False,
            font=dict(size=9, color="#4b5563"),
            hovertext=f"key {i}",
        )
        for i, x, side in ((0, x_domain[0], "left"), (len(tokens) - 1, x_domain[1], "right"))
    ]


def cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def thumbnail_frame(x_domain: list[float], y_domain: list[float], colour: str, plot_height: int) -> dict:
    """A frame in the kv group's colour around a thumbnail, clear of its cells: a white gap between, so
    a head whose attention all goes to key 0 (a sink) shows its first column, not a thicker frame. The
    gap is FRAME_GAP of the plot's width (which the page sets) and FRAME_GAP_PX of its height."""
    (x0, x1), (y0, y1) = x_domain, y_domain
    dy = FRAME_GAP_PX / plot_height
    return dict(
        type="rect",
        x0=x0 - FRAME_GAP,
        x1=x1 + FRAME_GAP,
        y0=y0 - dy,
        y1=y1 + dy,
        xref="paper",
        yref="paper",
        line=dict(color=colour, width=FRAME_WIDTH),
        layer="above",
    )
