"""Hover values at 3–4 significant digits in every figure the app draws: each value a hover template
prints is an integer, or formatted to 3 or 4 significant digits, and no text a figure carries writes a
number longer than that (a float printed as Python writes it has 17)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import explorer
from explorer import views
from explorer.app.examples import PATCHING_EXAMPLES

PROMPT = "When Mary and John went to the store, John gave a drink to"
PLACEHOLDER = re.compile(r"%\{([a-z]+)(\[(\d+)\])?(:[^}]*)?\}")
SIGNIFICANT = re.compile(r":[+,]?\.[34]g")  # 3 or 4 significant digits, signed or not
INTEGER = {":d", ":,"}
DECIMAL = re.compile(r"\d+\.\d+")


def significant_digits(decimal: str) -> int:
    """Significant digits a decimal is written with: "0.000717" 3, "2.8553402423858643" 17."""
    return len(decimal.replace(".", "").lstrip("0"))


@pytest.fixture(scope="module")
def every_figure():
    ex = explorer.load(device="cpu")
    run = ex.run(PROMPT)
    copy = PATCHING_EXAMPLES["induction (bundled model)"]
    patched = ex.patch_heads(copy.clean, copy.corrupted, copy.answer, copy.distractor)
    generation = ex.generate("To be, or not", max_new_tokens=3)
    steps = list(generation)
    from explorer.views import generation as gen

    graph, rollout = views.flow(run)
    plots = {
        "pipeline": views.pipeline(run, 2, 3),
        "pipeline (log, weighted)": views.pipeline(run, 2, 3, views.MapStyle(log=True, weighted=True)),
        "all heads": views.all_heads(run, 2),
        "zoom": views.zoom(run, 2, 3, views.default_zoom(run)),
        "rope angles": views.rope_angles(run),
        "rope wavelengths": views.rope_wavelengths(run),
        "rope rotation": views.rope_rotation(run, 2, 3, 5, 3),
        "rope split": views.rope_score_split(run, 2, 3, 5, 3),
        "gqa": views.gqa_diagram(run.config),
        "similarity": views.head_similarity(run, 2),
        "kv cache": views.kv_cache(run.config, 4),
        "faithfulness": views.faithfulness(run, 2),
        "overview": views.overview(run, views.head_profile(run)),
        "next tokens": views.next_tokens(run),
        "lens": views.lens_grid(run),
        "rank": views.target_rank(run),
        "attribution": views.attribution(run, " John", " the"),
        "heads looking at": views.heads_looking_at(run, 2),
        "flow": graph,
        "rollout": rollout,
        "patching": views.patching(patched),
        "ablation": views.ablation_next_tokens(run, ex.run(PROMPT, ablate=[(1, 1)])),
        "generation": gen.generation_map(generation, 1, 2),
        "candidates": gen.step_candidates(steps[-1]),
    }
    return {name: plot.figure() for name, plot in plots.items()}  # as plotly validates them


def values_of(trace: dict, key: str, index: str | None) -> np.ndarray | None:
    value = trace.get(key)
    if value is None or isinstance(value, str):
        return None
    array = np.asarray(value, dtype=object if key == "customdata" else None)
    if index is not None:
        array = np.asarray(
            [np.asarray(row).reshape(-1, np.asarray(row).shape[-1])[..., int(index)] for row in array]
        )
    return array


def is_float(values: np.ndarray | None) -> bool:
    if values is None or (values.dtype == object and not values.size):
        return False
    flat = np.asarray([v for v in np.ravel(values) if v is not None and not isinstance(v, str)])
    return flat.size > 0 and flat.dtype.kind == "f" and not np.all(np.mod(flat[np.isfinite(flat)], 1) == 0)


def test_every_hover_value_is_an_integer_or_has_three_or_four_significant_digits(every_figure):
    loose = []
    for name, fig in every_figure.items():
        for i, trace in enumerate(fig.to_plotly_json()["data"]):
            for key, _, index, spec in PLACEHOLDER.findall(str(trace.get("hovertemplate") or "")):
                if spec in INTEGER or SIGNIFICANT.fullmatch(spec or ""):
                    continue
                if spec or is_float(values_of(trace, key, index or None)):
                    loose.append(f"{name}, trace {i}: %{{{key}{spec}}}")
    assert loose == []


def test_no_text_a_figure_carries_writes_a_long_number(every_figure):
    long = []
    for name, fig in every_figure.items():
        texts = [fig.layout.title.text or ""]
        for trace in fig.to_plotly_json()["data"]:
            for key in ("text", "customdata", "hovertext"):
                texts += [
                    v for v in np.ravel(np.asarray(trace.get(key, []), dtype=object)) if isinstance(v, str)
                ]
        long += [f"{name}: {d}" for text in texts for d in DECIMAL.findall(text) if significant_digits(d) > 4]
    assert long == []
