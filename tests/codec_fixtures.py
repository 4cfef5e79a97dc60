"""Golden fixtures of the wire format (explorer/figures/codec.py writes it, the page's
explorer/app/ui/assets/codec.mjs reads it): for each case, the traces as the app sends them and, for
each map the page rebuilds, the values the figure holds. Built from seeded numbers through the figures'
public builders, in float32 steps that every CPU rounds alike, so the files hold on any machine.

pytest (tests/test_codec.py) holds that the encoder still writes each file as it is; `node --test`
(tests/codec.test.mjs) that the decoder turns each file's traces into its values.
Write them again after a change of the format (and raise codec.WIRE_VERSION):
    python -m tests.codec_fixtures
"""

from __future__ import annotations

import base64
import functools
import json
import sys
import zlib
from pathlib import Path

import numpy as np

from explorer.app import payload
from explorer.figures import KeyWrites, MapStyle, codec, pipeline_parts, rope_angles_figure, sendable
from explorer.figures.codec import encode_mask, encode_probs, encode_signed

FOLDER = Path(__file__).parent / "fixtures" / "codec"
SCALE = 0.25  # 1/√16


def _maps(n: int, seed: int) -> dict[str, np.ndarray]:
    """A head's stages over n positions, float32: scores, scaled, mask, masked (−∞ above the diagonal)
    and a softmax-like map (each row's positive weights over their sum, 0 above the diagonal)."""
    rng = np.random.RandomState(seed)  # a stream that stays the same in every numpy
    scores = (rng.standard_normal((n, n)) * 4).astype(np.float32)
    scaled = scores * np.float32(SCALE)
    mask = np.tril(np.ones((n, n), dtype=bool))
    masked = np.where(mask, scaled, -np.inf).astype(np.float32)
    weights = np.where(mask, rng.uniform(0.01, 1.0, (n, n)), 0).astype(np.float32)
    probs = weights / weights.sum(1, keepdims=True, dtype=np.float32)
    return dict(scores=scores, scaled=scaled, mask=mask, masked=masked, probs=probs)


def _tokens(n: int) -> list[str]:
    return [f" t{i}" for i in range(n)]


def _pipeline(n: int, seed: int, **options) -> list[dict]:
    m = _maps(n, seed)
    title = f"head {seed}"
    parts = pipeline_parts(
        _tokens(n), m["scores"], m["scaled"], m["mask"], m["masked"], m["probs"], SCALE, title, **options
    )
    return parts.plot()


def _pooled(n: int, seed: int, budget: int) -> list[dict]:
    """A long prompt's pipeline: every map pooled into blocks, in 8-bit codes."""
    m = _maps(n, seed)
    scores = encode_signed(m["scores"], budget_bytes=budget)
    scaled = encode_signed(m["scaled"], budget_bytes=budget)
    masked = encode_signed(m["masked"], budget_bytes=budget)
    probs = encode_probs(m["probs"], budget_bytes=budget)
    mask = encode_mask(m["mask"], budget_bytes=budget)
    return pipeline_parts(_tokens(n), scores, scaled, mask, masked, probs, SCALE, "head").plot()


def _weighted(n: int, seed: int) -> list[dict]:
    m = _maps(n, seed)
    norms = np.random.RandomState(seed + 1).uniform(0.5, 3.0, n).astype(np.float32)  # ‖v_j·W_O‖
    written = m["probs"] * norms[None, :]
    sums = written.sum(1, dtype=np.float32)
    shares = written / sums[:, None]
    writes = KeyWrites(probs=m["probs"], value_norms=norms, row_sums=sums)
    parts = pipeline_parts(
        _tokens(n), m["scores"], m["scaled"], m["mask"], m["masked"], shares, SCALE, "head",
        style=MapStyle(weighted=True), key_writes=writes,
    )  # fmt: skip
    return parts.plot()


def _angles(n: int) -> list[dict]:
    inv_freq = (1.0 / 10000 ** (np.arange(0, 16, 2, dtype=np.float32) / 16)).astype(np.float32)  # [8]
    angles = np.arange(n, dtype=np.float32)[:, None] * inv_freq[None, :]  # float32(m × θ_i)
    return rope_angles_figure(_tokens(n), angles, inv_freq)


def _case(name: str, fig) -> dict:
    """A figure's traces as sent, and the values of each map the page rebuilds (as the figure holds
    them, typed arrays as sent)."""
    full = sendable(fig)["data"]
    sent = sendable(fig, compact=True)["data"]
    expected = {}
    for i, (whole, compact) in enumerate(zip(full, sent, strict=True)):
        for key in ("z", "customdata"):
            if key in whole and compact.get(key) != whole[key]:
                expected.setdefault(str(i), {})[key] = whole[key]
    return dict(version=codec.WIRE_VERSION, name=name, sent=sent, expected=expected)


def _heads_case(n: int, heads: int) -> dict:
    """A layer's update carrying every head's pipeline: the shown head's figure as sent, and each other
    head's as what differs from it (deflated), beside each other head's figure as sent whole."""
    figures = [payload.sent_figure(_pipeline(n, 10 + h), f"head-{h}") for h in range(heads)]
    shown, others = figures[0], dict(enumerate(figures))
    others.pop(0)
    differences = codec.differences(shown, others)
    return dict(version=codec.WIRE_VERSION, name="heads", shown=shown, differences=differences, heads=figures)


@functools.cache
def fixtures() -> dict[str, dict]:
    """Every case, by file name (built once; read, never changed)."""
    return {
        "exact.json": _case("exact", _pipeline(12, 1)),
        "eight_bit.json": _case("eight_bit", _pipeline(12, 2, exact=False)),
        "pooled.json": _case("pooled", _pooled(40, 3, budget=400)),
        "weighted.json": _case("weighted", _weighted(12, 4)),
        "angles.json": _case("angles", _angles(300)),
        "heads.json": _heads_case(24, 3),
    }


def inflated(value):
    """A difference's arrays as sent to Plotly: each `deflate` array's bytes inflated (what the page's
    `codec.inflate` does, for tests in Python)."""
    if isinstance(value, list):
        return [inflated(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("deflate"):
        raw = zlib.decompress(base64.b64decode(value["bdata"]))
        return {k: v for k, v in value.items() if k != "deflate"} | {"bdata": base64.b64encode(raw).decode()}
    return {key: inflated(v) for key, v in value.items()}


def text(fixture: dict) -> str:
    return json.dumps(fixture, sort_keys=True, indent=1, allow_nan=False, default=_plain) + "\n"


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} in a fixture")


if __name__ == "__main__":
    FOLDER.mkdir(parents=True, exist_ok=True)
    for file, fixture in fixtures().items():
        (FOLDER / file).write_text(text(fixture), encoding="utf-8")
        print(f"{FOLDER / file}: {(FOLDER / file).stat().st_size:,} bytes", file=sys.stderr)
