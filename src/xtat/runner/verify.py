"""Output comparison: the whole output pytree against the reference, rule by rule.

The policy (docs/verification.md has the measurements behind it):

- structure, dtypes, shapes, exact (integer and bool) values, NaN and Inf
  positions must match;
- element rule: every element within ``atol + rtol*|want| + floor*rms(leaf)``,
  but for at most 1 in 10,000 of a leaf's elements (Adam's sign flips; those
  are held by the norm rule).
  The floor is relative to the leaf's root-mean-square, not its maximum: a
  reordered reduction or library kernel legally moves a near-zero element by a
  few ulps of the magnitudes it was summed from (Adam amplifies exactly
  those), and the leaf's RMS stands for those magnitudes; its maximum would
  let one large element hide errors in all the others;
- spread rule: at most a fraction (10%) of the elements may lean on that
  floor, i.e. lie beyond ``atol + rtol*|want|``; a kernel that moves most
  elements a little is wrong even when each move is within the floor. In a leaf
  too small for a fraction to mean anything one element may, but only a
  near-zero one (below a tenth of the leaf's RMS, where cancellation happened):
  a scalar loss is its own RMS, so a floor would be a plain 1e-3 relative
  tolerance, a hundred times what reassociating its sum moves it (issue 33);
  a scalar that moves that much under one-ulp input changes gets its budget
  from the calibration, as every chaotic output does;
- norm rule: the leaf's relative error norm ``|got-want|_2 / |want|_2``
  within a bound per dtype, which catches an error spread thinly over many
  elements; an error whose RMS is within ``atol`` more than that passes
  (below atol every rule calls a difference noise: a leaf of pure rounding
  noise differs by ~100% between two summation orders).

Chaotic outputs (accept/reject steps, long recurrences) move far under a
one-ulp change; for them a `Budget` calibrated per workload (see
`calibrate`) allows what a one-ulp perturbation of the inputs moves in the
default build itself, times a safety factor, and nothing more.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum

import numpy as np


class Rule(StrEnum):
    STRUCTURE = "structure"
    EXACT = "exact"
    NAN = "nan"
    INF = "inf"
    ELEMENT = "element"
    SPREAD = "spread"
    NORM = "norm"


@dataclass(frozen=True)
class Bounds:
    rtol: float
    atol: float
    floor: float  # times the leaf's RMS
    norm: float  # relative error norm
    spread: float = 0.1  # fraction of elements that may use the floor (be beyond atol + rtol*|want|)
    # Fraction of elements that may exceed the element bound at all, their error limited by the norm
    # rule only: Adam's first steps move a parameter by +-lr whatever its gradient's size, so a
    # near-zero gradient whose sign a reordering flips moves it by 2*lr (seen: 1-4 elements in
    # 36864-2359296 of ResNet-18's kernels with `algsimp` off, 33-62x the bound). Rounded up in a
    # leaf of `outlier_leaf` elements or more: one flip in halonet/train's 4096-element attention
    # kernel under another dot library; never in a smaller leaf, where one element is a share.
    outliers: float = 1e-4
    outlier_leaf: int = 1000


_BOUNDS = {
    "float16": Bounds(1e-2, 1e-3, 1e-2, 1e-2),
    "bfloat16": Bounds(2e-2, 1e-2, 2e-2, 2e-2),
    "float32": Bounds(1e-4, 1e-5, 1e-3, 1e-3),
    "float64": Bounds(1e-9, 1e-12, 1e-7, 1e-7),
    "complex64": Bounds(1e-4, 1e-5, 1e-3, 1e-3),
    "complex128": Bounds(1e-9, 1e-12, 1e-7, 1e-7),
}
_EXACT = Bounds(0.0, 0.0, 0.0, 0.0)
_DEFAULT_SPREAD = Bounds.spread
NEAR_ZERO = 0.1  # an element below this share of its leaf's RMS: a cancellation, which the floor is for


@dataclass(frozen=True)
class Tolerance:
    """The user's element tolerance (with --allow-numerics-change); None: by dtype."""

    rtol: float | None = None
    atol: float | None = None

    def bounds(self, dtype: np.dtype) -> Bounds:
        b = _BOUNDS.get(str(dtype), _EXACT)
        rtol = b.rtol if self.rtol is None else self.rtol
        atol = b.atol if self.atol is None else self.atol
        # A user who relaxes the element tolerance relaxes the norm bound alike.
        return Bounds(rtol, atol, b.floor, max(b.norm, rtol), b.spread, b.outliers, b.outlier_leaf)


@dataclass(frozen=True)
class LeafBudget:
    """What one output may move beyond the element and norm bounds (calibrated; default: nothing)."""

    outliers: int = 0  # elements allowed beyond the element bound ...
    excess: float = 1.0  # ... by at most this multiple of it
    norm: float = 0.0  # relative error norm allowed (the larger of this and the dtype's bound)
    spread: float = 0.0  # fraction of elements allowed to use the floor (the larger of this and the dtype's)


@dataclass(frozen=True)
class Budget:
    leaves: tuple[LeafBudget, ...] = ()  # by output index; missing: the default
    perturbations: int = 0  # perturbed runs behind the calibration (0: not calibrated)
    factor: float = 0.0  # safety factor applied to what they moved

    def leaf(self, index: int) -> LeafBudget:
        return self.leaves[index] if index < len(self.leaves) else LeafBudget()

    @property
    def widened(self) -> list[int]:
        """Outputs whose budget allows more than the default policy."""
        return [i for i, b in enumerate(self.leaves) if b.outliers or b.spread > _DEFAULT_SPREAD]

    def to_json(self) -> dict:
        return {"leaves": [asdict(b) for b in self.leaves], "perturbations": self.perturbations,
                "factor": self.factor}

    @classmethod
    def from_json(cls, data: dict | None) -> Budget:
        if not data:
            return cls()
        return cls(tuple(LeafBudget(int(b["outliers"]), float(b["excess"]), float(b["norm"]), float(b["spread"]))
                         for b in data["leaves"]), int(data["perturbations"]), float(data["factor"]))

    def describe(self) -> str:
        if not self.perturbations:
            return "default policy (not calibrated)"
        wide = self.widened
        if not wide:
            return f"default policy: {self.perturbations} one-ulp input perturbations moved no output beyond it"
        parts = [f"output {i}: {self.leaves[i].outliers} element(s) up to {self.leaves[i].excess:.3g}x the element "
                 f"bound, error norm {self.leaves[i].norm:.2g}" for i in wide[:4]]
        return (f"calibrated from {self.perturbations} one-ulp input perturbations (x{self.factor:g}): "
                + "; ".join(parts) + (" ..." if len(wide) > 4 else ""))


@dataclass(frozen=True)
class LeafStats:
    """How far one inexact output is from its reference."""

    beyond: int  # elements beyond the element bound
    spread: float  # fraction of elements beyond their own-magnitude bound atol + rtol*|want|
    size: int  # finite elements compared
    excess: float  # the largest |got - want| / element bound
    norm: float  # |got - want|_2 / |want|_2
    worst: tuple[int, ...]  # index of the element with the largest excess
    got: float
    want: float
    max_abs: float
    max_rel: float
    error_rms: float = 0.0  # |got - want|_2 / sqrt(size)
    want_rms: float = 0.0  # |want|_2 / sqrt(size)
    typical_spread: int = 0  # elements beyond atol + rtol*|want| that are not near zero (>= NEAR_ZERO x RMS)


@dataclass(frozen=True)
class Mismatch:
    """One failed rule: which, where, and by how much."""

    rule: Rule
    output: int
    detail: str
    index: tuple[int, ...] | None = None
    measured: float | None = None
    allowed: float | None = None

    def to_json(self) -> dict:
        return {"rule": self.rule.value, "output": self.output, "index": list(self.index) if self.index else None,
                "measured": _finite_or_none(self.measured), "allowed": _finite_or_none(self.allowed),
                "detail": self.detail}


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    mismatches: tuple[Mismatch, ...] = ()
    stats: dict[int, LeafStats] = field(default_factory=dict)  # inexact outputs that matched in structure

    @property
    def message(self) -> str:
        return "; ".join(f"output {m.output}: {m.detail}" for m in self.mismatches[:3])


def leaf_stats(got: np.ndarray, want: np.ndarray, bounds: Bounds) -> LeafStats:
    """Element and norm statistics of finite elements (NaN/Inf positions are checked before)."""
    kind = np.complex128 if np.iscomplexobj(want) else np.float64
    got64, want64 = got.astype(kind).ravel(), want.astype(kind).ravel()
    finite = np.isfinite(want64)
    diff = np.abs(got64[finite] - want64[finite])
    scale = np.abs(want64[finite])
    if diff.size == 0:
        return LeafStats(0, 0.0, 0, 0.0, 0.0, (), 0.0, 0.0, 0.0, 0.0)
    rms = float(np.sqrt(np.mean(scale ** 2)))
    own = bounds.atol + bounds.rtol * scale
    bound = own + bounds.floor * rms
    ratio = diff / np.maximum(bound, np.finfo(np.float64).tiny)
    worst = int(np.argmax(ratio))
    flat_index = int(np.flatnonzero(finite)[worst])
    norm_want = float(np.linalg.norm(want64[finite]))
    norm_diff = float(np.linalg.norm(diff))
    norm = norm_diff / norm_want if norm_want > 0 else (0.0 if norm_diff == 0 else math.inf)
    return LeafStats(
        beyond=int(np.count_nonzero(ratio > 1.0)), spread=float(np.count_nonzero(diff > own)) / diff.size,
        size=int(diff.size),
        excess=float(ratio[worst]), norm=norm,
        worst=tuple(int(i) for i in np.unravel_index(flat_index, want.shape)),
        got=float(np.abs(got64[flat_index])) if kind is np.complex128 else float(got64[flat_index].real),
        want=float(np.abs(want64[flat_index])) if kind is np.complex128 else float(want64[flat_index].real),
        max_abs=float(np.max(diff)), max_rel=float(np.max(diff / np.maximum(scale, np.finfo(np.float64).tiny))),
        error_rms=norm_diff / math.sqrt(diff.size), want_rms=rms,
        typical_spread=int(np.count_nonzero((diff > own) & (scale >= NEAR_ZERO * rms))),
    )


def compare(outputs: list[np.ndarray], reference: list[np.ndarray], tolerance: Tolerance,
            budget: Budget | None = None) -> Comparison:
    """Every rule on every output; all failures are reported, the worst first per output."""
    budget = budget or Budget()
    if len(outputs) != len(reference):
        return Comparison(False, math.inf, math.inf, (
            Mismatch(Rule.STRUCTURE, 0, f"{len(outputs)} outputs, reference has {len(reference)}"),))
    worst_abs = worst_rel = 0.0
    mismatches: list[Mismatch] = []
    stats: dict[int, LeafStats] = {}
    for index, (got, want) in enumerate(zip(outputs, reference)):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape or got.dtype != want.dtype:
            mismatches.append(Mismatch(Rule.STRUCTURE, index,
                                       f"{got.dtype}{list(got.shape)} vs reference {want.dtype}{list(want.shape)}"))
            continue
        if not np.issubdtype(want.dtype, np.inexact):
            differ = got != want
            count = int(np.count_nonzero(differ))
            if count:
                at = tuple(int(i) for i in np.argwhere(differ)[0]) if want.ndim else ()
                mismatches.append(Mismatch(Rule.EXACT, index, f"{count} exact values differ (first at {list(at)})",
                                           at, float(count), 0.0))
                worst_abs = max(worst_abs, float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))))
            continue
        nan_got, nan_want = np.isnan(got), np.isnan(want)
        if not np.array_equal(nan_got, nan_want):
            count = int(np.count_nonzero(nan_got != nan_want))
            mismatches.append(Mismatch(Rule.NAN, index, f"NaN at {count} other positions", measured=float(count),
                                       allowed=0.0))
            worst_abs = worst_rel = math.inf
            continue
        inf_got, inf_want = np.isinf(got), np.isinf(want)
        if not np.array_equal(inf_got, inf_want) or not np.array_equal(got[inf_got], want[inf_want]):
            mismatches.append(Mismatch(Rule.INF, index, "Inf at other positions or of other sign"))
            worst_abs = worst_rel = math.inf
            continue
        bounds = tolerance.bounds(want.dtype)
        s = leaf_stats(got, want, bounds)
        stats[index] = s
        worst_abs, worst_rel = max(worst_abs, s.max_abs), max(worst_rel, s.max_rel)
        mismatches += _judge(index, s, bounds, budget.leaf(index))
    return Comparison(not mismatches, worst_abs, worst_rel, tuple(mismatches), stats)


def _judge(index: int, s: LeafStats, bounds: Bounds, allowed: LeafBudget) -> list[Mismatch]:
    out = []
    where = f"worst at {list(s.worst)}: {s.got:.7g} vs {s.want:.7g}"
    # Outliers held by the norm rule alone.
    fraction = math.ceil(bounds.outliers * s.size) if s.size >= bounds.outlier_leaf else 0
    if s.beyond > max(allowed.outliers, fraction):
        out.append(Mismatch(Rule.ELEMENT, index, f"{s.beyond} values beyond the element bound (rtol={bounds.rtol:g} "
                            f"atol={bounds.atol:g} floor={bounds.floor:g}xRMS; {max(allowed.outliers, fraction)} "
                            f"allowed), {where}, {s.excess:.3g}x the bound", s.worst, float(s.beyond),
                            float(max(allowed.outliers, fraction))))
    elif s.beyond > fraction and s.excess > max(1.0, allowed.excess):
        out.append(Mismatch(Rule.ELEMENT, index, f"{where} is {s.excess:.3g}x the element bound "
                            f"({max(1.0, allowed.excess):.3g}x allowed)", s.worst, s.excess, allowed.excess))
    spread_allowed = max(bounds.spread, allowed.spread)
    spread_count = math.floor(spread_allowed * s.size)
    # In a leaf of three a fraction means nothing: one element may lean on the floor there, if it
    # is near zero; an element of the leaf's own magnitude (a scalar loss) may not.
    if s.spread * s.size > max(1, spread_count) or s.typical_spread > spread_count:
        out.append(Mismatch(Rule.SPREAD, index, f"{s.spread:.1%} of the values beyond rtol={bounds.rtol:g} "
                            f"atol={bounds.atol:g} of their own magnitude ({spread_allowed:.1%} allowed)",
                            None, s.spread, spread_allowed))
    norm_allowed = max(bounds.norm, allowed.norm)
    # The absolute tolerance holds here too: an error whose RMS is below atol is noise at the level
    # every element is allowed (a leaf of rounding noise, e.g. Adam's moments of a gradient that
    # cancels to ~1e-10, has a relative error near 1 between any two summation orders).
    if s.error_rms > norm_allowed * s.want_rms + bounds.atol:
        out.append(Mismatch(Rule.NORM, index, f"relative error norm {s.norm:.3g} beyond {norm_allowed:.3g}",
                            None, s.norm, norm_allowed))
    return out


# -- calibration --------------------------------------------------------------

CALIBRATION_RUNS = 3
SAFETY_FACTOR = 4.0


def perturbed(leaves: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """Each nonzero finite float element moved one ulp up or down at random; others unchanged
    (zeros are often masks or structure, integers are keys and indices)."""
    rng = np.random.default_rng(seed)
    out = []
    for leaf in leaves:
        leaf = np.asarray(leaf)
        if not np.issubdtype(leaf.dtype, np.floating) or leaf.size == 0:
            out.append(leaf)
            continue
        direction = np.where(rng.random(leaf.shape) < 0.5, -np.inf, np.inf).astype(leaf.dtype)
        moved = np.nextafter(leaf, direction)
        out.append(np.where(np.isfinite(leaf) & (leaf != 0), moved, leaf).astype(leaf.dtype))
    return out


def calibrate(runs: list[Comparison], count: int, factor: float = SAFETY_FACTOR) -> Budget:
    """The budget of `count` outputs from comparisons of perturbed-input runs of the default
    with the unperturbed reference: what they moved, times `factor`; outputs they did not
    move beyond the bounds keep the default policy."""
    leaves = []
    for index in range(count):
        seen = [c.stats[index] for c in runs if index in c.stats]
        if not seen:
            leaves.append(LeafBudget())
            continue
        beyond = max(s.beyond for s in seen)
        norm = max(s.norm for s in seen)
        leaves.append(LeafBudget(
            outliers=math.ceil(factor * beyond), excess=factor * max(s.excess for s in seen) if beyond else 1.0,
            norm=factor * norm if beyond else 0.0, spread=min(1.0, factor * max(s.spread for s in seen))))
    return Budget(tuple(leaves), len(runs), factor)


def _finite_or_none(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None
