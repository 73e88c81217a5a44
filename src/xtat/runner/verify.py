"""Output comparison: the whole output pytree against the reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# (rtol, atol, floor) by dtype. rtol/atol act per element as in numpy.allclose;
# floor is relative to the output's largest magnitude: reordered reductions and
# other library kernels legally move near-zero elements by a few ulps of the
# large ones (Adam updates amplify exactly those), while a wrong kernel errs by
# a sizeable fraction of the output's scale.
_DEFAULT_TOLERANCES = {
    "float16": (1e-2, 1e-3, 1e-2),
    "bfloat16": (2e-2, 1e-2, 2e-2),
    "float32": (1e-4, 1e-5, 1e-3),
    "float64": (1e-9, 1e-12, 1e-7),
    "complex64": (1e-4, 1e-5, 1e-3),
    "complex128": (1e-9, 1e-12, 1e-7),
}


@dataclass(frozen=True)
class Tolerance:
    rtol: float | None = None  # None: by dtype
    atol: float | None = None

    def for_dtype(self, dtype: np.dtype) -> tuple[float, float, float]:
        rtol, atol, floor = _DEFAULT_TOLERANCES.get(str(dtype), (0.0, 0.0, 0.0))
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol, floor)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    message: str = ""


def compare(outputs: list[np.ndarray], reference: list[np.ndarray], tolerance: Tolerance) -> Comparison:
    """Equal structure, dtypes and shapes; NaN/Inf at the same places; finite values close."""
    if len(outputs) != len(reference):
        return Comparison(False, np.inf, np.inf, f"{len(outputs)} outputs, reference has {len(reference)}")
    worst_abs = worst_rel = 0.0
    problems = []
    for index, (got, want) in enumerate(zip(outputs, reference)):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.dtype != want.dtype:
            problems.append(f"output {index}: {got.dtype}{list(got.shape)} vs reference {want.dtype}{list(want.shape)}")
            continue
        if not np.issubdtype(want.dtype, np.inexact):
            mismatched = int(np.count_nonzero(got != want))
            if mismatched:
                problems.append(f"output {index}: {mismatched} exact values differ")
                worst_abs = max(worst_abs, float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))))
            continue
        got64, want64 = got.astype(np.complex128 if np.iscomplexobj(want) else np.float64), want.astype(
            np.complex128 if np.iscomplexobj(want) else np.float64)
        nan_got, nan_want = np.isnan(got64), np.isnan(want64)
        if not np.array_equal(nan_got, nan_want):
            problems.append(f"output {index}: NaN at {int(np.count_nonzero(nan_got != nan_want))} other positions")
            worst_abs = worst_rel = np.inf
            continue
        inf_got, inf_want = np.isinf(got64), np.isinf(want64)
        if not np.array_equal(inf_got, inf_want) or not np.array_equal(got64[inf_got], want64[inf_want]):
            problems.append(f"output {index}: Inf at other positions or of other sign")
            worst_abs = worst_rel = np.inf
            continue
        finite = ~(nan_want | inf_want)
        diff = np.abs(got64[finite] - want64[finite])
        if diff.size == 0:
            continue
        scale = np.abs(want64[finite])
        rtol, atol, floor = tolerance.for_dtype(want.dtype)
        abs_err = float(np.max(diff))
        rel_err = float(np.max(diff / np.maximum(scale, np.finfo(np.float64).tiny)))
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        bound = atol + rtol * scale + floor * float(np.max(scale))
        bad = int(np.count_nonzero(diff > bound))
        if bad:
            problems.append(f"output {index}: {bad} values beyond rtol={rtol:g} atol={atol:g}")
    return Comparison(not problems, worst_abs, worst_rel, "; ".join(problems[:3]))
