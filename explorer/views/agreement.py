"""Does the eager rerun reproduce the fast path? A layer's check, as the Faithfulness tab and the
Attention view state it: max |eager − SDPA| of the layer's attention output, against a tolerance from
float32 rounding at the output's scale (`engine.attention.float32_tolerance`), not a fixed number: an
output whose entries reach tens differs in the fifth decimal between two summation orders."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.engine.attention import ROUNDING_UNITS, float32_tolerance


@dataclass(frozen=True, kw_only=True)
class Faithfulness:
    """One layer's check, a few numbers kept with the run."""

    max_abs_diff: float  # max |eager − SDPA| of the layer's attention output
    output_scale: float  # max |SDPA output|: the scale its rounding is measured at
    eager_seconds: float  # the eager path's time

    nbytes = 24

    @property
    def tolerance(self) -> float:
        return float32_tolerance(self.output_scale)

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance

    def summary(self) -> str:
        """The verdict as the Attention view states it."""
        if self.ok:
            return f"eager rerun = SDPA to {self.max_abs_diff:.1e} (tolerance {self.tolerance:.1e})"
        return f"eager rerun ≠ SDPA: {self.max_abs_diff:.1e}, OUTSIDE the tolerance {self.tolerance:.1e}"

    def explained(self) -> str:
        """Where the tolerance comes from, in a few words."""
        return f"{ROUNDING_UNITS} float32 roundings at the output's largest entry, {self.output_scale:.3g}"


def check_outputs(eager: torch.Tensor, sdpa: torch.Tensor, eager_seconds: float) -> Faithfulness:
    """The check of an eager output against the fast path's.  # [N, hidden] each"""
    return Faithfulness(
        max_abs_diff=float((eager - sdpa).abs().max()),
        output_scale=float(sdpa.abs().max()),
        eager_seconds=eager_seconds,
    )
