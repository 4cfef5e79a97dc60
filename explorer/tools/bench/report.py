"""The benchmark's ratios, targets and Markdown table, from the rows `explorer.bench` measured."""

from __future__ import annotations

from typing import Any

# contender -> (letter, column heading), in the order they are run and shown
CONTENDERS = {
    "first_view": ("a", "(a) first view, ours"),
    "switch": ("b", "(b) layer switch, ours"),
    "hf_eager": ("c", "(c) HF eager + attentions"),
    "hf_sdpa": ("d", "(d) HF SDPA `model(ids)`"),
    "hf_sdpa_last": ("d′", "(d′) HF SDPA, last logits"),
    "tl": ("e", "(e) TransformerLens"),
}
# ratio -> (numerator, denominator, what is divided)
RATIOS = {
    "a/d": ("first_view", "hf_sdpa", "seconds"),
    "a/d′": ("first_view", "hf_sdpa_last", "seconds"),
    "c/a": ("hf_eager", "first_view", "seconds"),
    "e/a": ("tl", "first_view", "seconds"),
    "b/d": ("switch", "hf_sdpa", "seconds"),
    "mem(c)/mem(a)": ("hf_eager", "first_view", "peak_extra_bytes"),
}
# (ratio, "<=" or ">=", bound, N it applies to; None: every N)
TARGETS = [
    ("a/d", "<=", 1.10, None),
    ("c/a", ">=", 3.0, 2048),
    ("mem(c)/mem(a)", ">=", 10.0, 2048),
    ("b/d", "<=", 0.05, 1024),
]
LEGEND = """\
- (a) `ex.run(text)` + `run.top_next_tokens()` + `run.attention(0)`: what the app computes for a first
  view. The forward keeps each layer's input; logits are computed for the last position only.
- (b) `run.attention(layer)` for another layer of that run: the eager rerun alone, no forward.
- (c) `transformers`, `attn_implementation="eager"`, `model(ids, output_attentions=True)`: every
  layer's N×N maps, kept.
- (d) `transformers`, `attn_implementation="sdpa"`, `model(ids)`: the call people make, with logits at
  every position. It is the floor the targets use. (d′) is the same call with `logits_to_keep=1`, the
  strict floor: the same work as our forward, which needs only the next-token logits.
- (e) TransformerLens 4.x: a `TransformerBridge` around its own copy of the HF model (it switches it to
  eager attention), `run_with_cache(ids)`: every activation, maps included, kept.
- Memory: peak resident memory above what the process held after loading and warm-up (on CUDA: peak
  allocated device memory), over the timed calls, in MiB."""


def _value(rows, contender: str, n: int, key: str) -> float | None:
    for row in rows:
        if row["contender"] == contender and row["n_tokens"] == n and row["status"] == "ok":
            return row[key]
    return None


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """For each N measured: every ratio, or None where a side is missing."""
    by_n = {}
    for n in sorted({row["n_tokens"] for row in rows}):
        values = {}
        for name, (top, bottom, key) in RATIOS.items():
            a, b = _value(rows, top, n, key), _value(rows, bottom, n, key)
            values[name] = a / b if a is not None and b else None
        by_n[str(n)] = values
    return by_n


def targets(ratios_by_n: dict[str, dict[str, float | None]]) -> list[dict[str, Any]]:
    """Each target with the values it was judged on and whether it is met (None: not measured)."""
    judged = []
    for name, sign, bound, at in TARGETS:
        ns = list(ratios_by_n) if at is None else [str(at)] if str(at) in ratios_by_n else []
        values = {n: ratios_by_n[n][name] for n in ns}
        met = None
        if values and None not in values.values():
            met = all(v <= bound if sign == "<=" else v >= bound for v in values.values())
        judged.append({"ratio": name, "rule": f"{sign} {bound}", "at": at or "every N", "values": values})
        judged[-1]["met"] = met
    return judged


def markdown(results: dict[str, Any]) -> str:
    m, setup, rows = results["machine"], results["setup"], results["rows"]
    lengths = sorted({row["n_tokens"] for row in rows})
    model = setup.get("model") or f"{setup['shape']}-shaped, random init"
    lines = [
        f"Model: {model}, {setup['dtype']}, on {m['device']}"
        f"{' (' + m['gpu'] + ')' if m.get('gpu') else ''}. Machine: {m['cpu']}, {m['logical_cores']} "
        f"logical cores, {m['torch_threads']} torch threads, {m['memory_gib']} GiB; Python {m['python']}, "
        f"torch {m['torch']}, transformers {m['transformers']}, transformer-lens "
        f"{m['transformer_lens'] or 'not installed'}; {m['date']}.",
        f"Each cell: median of {setup['repeats']} timed calls after {setup['warmups']} warm-up, "
        "each (contender, N) in a fresh process; then the peak extra memory. "
        f"1-minute load average as each measurement started: {_load_range(rows)}.",
        "",
        _table(
            ["N", *(heading for _, heading in CONTENDERS.values())],
            [[str(n), *(_cell(rows, contender, n) for contender in CONTENDERS)] for n in lengths],
        ),
        "",
        _table(
            ["N", *RATIOS],
            [[n, *(_number(v) for v in values.values())] for n, values in results["ratios"].items()],
        ),
        "",
        _table(
            ["target", "at", "met"],
            [[f"{t['ratio']} {t['rule']}", str(t["at"]), _verdict(t)] for t in results["targets"]],
        ),
        "",
        LEGEND,
        *_unavailable(rows),
        "",
        _app_bytes(results["app_update_bytes"]),
    ]
    return "\n".join(lines) + "\n"


def _table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])


def _cell(rows, contender: str, n: int) -> str:
    seconds = _value(rows, contender, n, "seconds")
    if seconds is None:
        return "—"
    return f"{seconds:.3g} s · {_value(rows, contender, n, 'peak_extra_bytes') / 2**20:,.0f} MiB"


def _load_range(rows) -> str:
    loads = [row["load_average"] for row in rows if row["status"] == "ok"]
    return f"{min(loads):.2f}–{max(loads):.2f}" if loads else "—"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _verdict(target: dict[str, Any]) -> str:
    if target["met"] is None:
        return "not measured"
    values = ", ".join(_number(v) for v in target["values"].values())
    return f"{'yes' if target['met'] else '**no**'} ({values})"


def _unavailable(rows) -> list[str]:
    missing = {(row["contender"], row["reason"]) for row in rows if row["status"] != "ok"}
    return [f"- Missing {CONTENDERS[c][0]}: {reason}" for c, reason in sorted(missing)]


def _app_bytes(app: dict[str, Any]) -> str:
    if app["status"] != "ok":
        return f"Bytes of one app update: not measured ({app['reason']})."
    parts = [
        f"{n} tokens: " + ", ".join(f"{view} {size:,} B" for view, size in views.items())
        for n, views in app["bytes"].items()
    ]
    return "Bytes of one app update (JSON sent to the browser): " + "; ".join(parts) + "."
