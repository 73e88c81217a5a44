"""Decision points of one jaxpr level, and where nested jaxprs hang.

Id format (stable across re-traces of the same program; nothing in it depends
on object identity or variable names):

    location   top-level equation i            -> "i"
               equation j in the k-th nested    -> "<loc of the owner>.k/j"
               jaxpr of that equation
               (k counts the equation's jaxpr-valued params in sorted param
               name order, tuples element by element: cond branches 0..n-1,
               while body_jaxpr=0 / cond_jaxpr=1, custom_linear_solve
               matvec..transpose_solve=0..3, every other owner 0)
               e.g. "2.0/3.1/0": eqn 0 of branch 1 of the cond at eqn 3 of
               the body of the scan at top-level eqn 2.
    scan       "scan@<loc>:len<length>:<input avals>"      values: ints
               1,2,4,8,16 below length, plus length itself (= full unroll)
               when length <= 64; default: the eqn's unroll (usually 1)
    layout     "dot_general@<loc>:<lhs aval>,<rhs aval>"   values: "default",
               "lhs_t", "rhs_t" (only operands with one contracting and one
               free axis besides batch axes, neither of size 1)
    dot group  "dot_general@*:<lhs aval>,<rhs aval>"       every dot of that
               shape class, wherever it is (offered when there are two or
               more), at once; values: those all of them offer. A dot's own
               layout decision, when also chosen, overrides its group's.
    barrier    "barrier@<prefix><p>><c>:<producer prim>><consumer prim>:<edge aval>"
               values: False (default), True. p, c: producer and consumer
               equations of one jaxpr; prefix is that jaxpr's location
               prefix ("" at the top level, "2.0/" in the body above)
    knob       "knob:<name>"                               values: its choices

Avals are written "f32[8,16]"; a list of avals longer than 64 characters is
replaced by "<n>avals#<sha1 prefix>" to keep ids short.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from jax._src import core  # Jaxpr, ClosedJaxpr, Literal, DropVar, JaxprEqn

SCAN = "scan"
DOT = "dot_general"
BARRIER = "barrier"
KINDS = (SCAN, DOT, BARRIER)

SCAN_UNROLLS = (1, 2, 4, 8, 16)  # offered when < length
FULL_UNROLL_MAX = 64  # full unroll (unroll=length) offered up to this length

LAYOUT_DEFAULT, LAYOUT_LHS_T, LAYOUT_RHS_T = "default", "lhs_t", "rhs_t"
EVERYWHERE = "*"  # the location of a group decision: every op of its class, at any depth

# Ops XLA fuses into loop/reduction fusions: a barrier between two of them can
# split a fusion. Layout-changing and data-movement ops are left out on purpose.
ELEMENTWISE = frozenset(
    """abs acos acosh add add_any and asin asinh atan atan2 atanh cbrt ceil clamp
    complex conj convert_element_type copy cos cosh digamma div eq erf erf_inv erfc
    exp exp2 expm1 floor ge gt imag integer_pow is_finite le lgamma log log1p
    logistic lt max min mul ne neg nextafter not or pow real reduce_precision rem
    round rsqrt select_n shift_left shift_right_arithmetic shift_right_logical sign
    sin sinh sqrt square sub tan tanh xor""".split()
)
BROADCAST = frozenset({"broadcast_in_dim"})
REDUCE = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or"})
FUSIBLE = ELEMENTWISE | BROADCAST | REDUCE
# Consumers that XLA fuses their producers into although they read an operand
# element many times (or not at all): every read recomputes the fused producer.
# A barrier in front of them makes XLA materialise the operand once, so their
# edges are ranked before all others.
REUSING = frozenset({"gather", "dynamic_slice"})
# What a layout adds to a trace: its constraints on marked intermediates, and the reshards jax's
# autodiff puts in front of them (the cotangent seed). They carry no decision of this stage.
LAYOUT_ONLY = frozenset({"sharding_constraint", "reshard"})


@dataclass(frozen=True)
class Point:
    """A decision point found in one jaxpr level."""

    kind: str
    id: str
    eqn: int  # the equation it applies to (the consumer, for barriers)
    values: tuple
    default: object
    producer: int = -1  # barriers only
    operand: int = -1  # barriers only: the consumer's operand that the edge feeds
    size: int = 0  # barriers: bytes of the edge; dots: FLOPs (to rank them)
    reusing: bool = False  # barriers only: the consumer reads operand elements many times


def short_aval(aval: Any) -> str:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return str(aval)
    itemsize = _itemsize(dtype)
    if itemsize is None:  # extended dtypes (PRNG keys) have no numpy name
        return f"{dtype}[{','.join(str(d) for d in shape)}]"
    name = np.dtype(dtype).name.replace("float", "f").replace("uint", "u").replace("int", "i").replace("complex", "c")
    return f"{name}[{','.join(str(d) for d in shape)}]"


def _itemsize(dtype: Any) -> int | None:
    if dtype is None:
        return None
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return None


def aval_list(avals: list[Any]) -> str:
    text = ",".join(short_aval(a) for a in avals)
    if len(text) <= 64:
        return text
    return f"{len(avals)}avals#{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def id_location(decision_id: str) -> str | None:
    """The location part of a structural id, or None if the id has no such form."""
    kind, at, rest = decision_id.partition("@")
    if not at or kind not in KINDS:
        return None
    location, colon, _ = rest.partition(":")
    return location if colon and location else None


def group_id(point: Point) -> str | None:
    """The id of the group a dot belongs to (its shape class: every dot with the same operand avals),
    None for other points."""
    if point.kind != DOT:
        return None
    return f"{DOT}@{EVERYWHERE}:{point.id.partition(':')[2]}"


def groups(points: list[Point]) -> list[Point]:
    """One point per shape class of two or more dots: the values every member offers, its size their
    FLOPs together; costliest first (stable: program order breaks ties)."""
    members: dict[str, list[Point]] = {}
    for point in points:
        if (group := group_id(point)) is not None:
            members.setdefault(group, []).append(point)
    found = []
    for group, dots in members.items():
        values = tuple(v for v in dots[0].values if all(v in d.values for d in dots))
        if len(dots) >= 2 and len(values) >= 2:
            found.append(Point(DOT, group, -1, values, LAYOUT_DEFAULT, size=sum(d.size for d in dots)))
    return sorted(found, key=lambda p: -p.size)


def sub_jaxprs(eqn: core.JaxprEqn) -> list[tuple[str, int, core.Jaxpr | core.ClosedJaxpr]]:
    """Nested jaxprs of an equation as (param name, tuple index or -1, jaxpr), in id order."""
    out = []
    for name in sorted(eqn.params):
        value = eqn.params[name]
        if isinstance(value, (core.Jaxpr, core.ClosedJaxpr)):
            out.append((name, -1, value))
        elif isinstance(value, tuple):
            out.extend((name, i, v) for i, v in enumerate(value) if isinstance(v, (core.Jaxpr, core.ClosedJaxpr)))
    return out


def replace_sub_jaxprs(params: dict, new: dict[tuple[str, int], core.Jaxpr | core.ClosedJaxpr]) -> dict:
    """params with the given nested jaxprs replaced (keys as in `sub_jaxprs`)."""
    params = dict(params)
    for (name, index), jaxpr in new.items():
        if index < 0:
            params[name] = jaxpr
        else:
            items = list(params[name])
            items[index] = jaxpr
            params[name] = type(params[name])(items) if type(params[name]) is tuple else params[name]._make(items)
    return params


def locations(jaxpr: core.Jaxpr) -> list[int]:
    """Each equation's number in decision ids: its index, not counting the layout's equations before it
    (`LAYOUT_ONLY`: the constraints on intermediates marked with `xtat.constrain`, and their reshards),
    so every id stays as the trace without a layout has it."""
    numbers, number = [], 0
    for eqn in jaxpr.eqns:
        numbers.append(number)
        number += eqn.primitive.name not in LAYOUT_ONLY
    return numbers


def level_points(jaxpr: core.Jaxpr, prefix: str) -> list[Point]:
    """Every decision point of this jaxpr level (nested jaxprs not included), in equation order."""
    at = locations(jaxpr)
    producers: dict[core.Var, int] = {}
    points: list[Point] = []
    for i, eqn in enumerate(jaxpr.eqns):
        name = eqn.primitive.name
        loc = f"{prefix}{at[i]}"
        if name in LAYOUT_ONLY:  # transparent: its output is its operand, laid out
            if eqn.invars and isinstance(eqn.invars[0], core.Var) and eqn.invars[0] in producers:
                producers[eqn.outvars[0]] = producers[eqn.invars[0]]
            continue
        if name == SCAN:
            point = _scan_point(eqn, loc, i)
            if point is not None:
                points.append(point)
        elif name == DOT:
            point = _dot_point(eqn, loc, i)
            if point is not None:
                points.append(point)
        reusing = reusing_operands(eqn)
        if name in FUSIBLE or reusing:
            points.extend(_barrier_points(eqn, i, prefix, producers, jaxpr, reusing, at, every=name in FUSIBLE))
        if name in FUSIBLE:
            if len(eqn.outvars) == 1 and not isinstance(eqn.outvars[0], core.DropVar):
                producers[eqn.outvars[0]] = i
    return points


def reusing_operands(eqn: core.JaxprEqn) -> set[int]:
    """Operand positions that a data-reusing op reads (its data operand, not its indices),
    directly or as an argument a `jit` call passes straight to one (`jnp.take` is such a call)."""
    if eqn.primitive.name in REUSING:
        return {0}
    if eqn.primitive.name not in ("jit", "pjit") or "jaxpr" not in eqn.params:
        return set()
    inner = eqn.params["jaxpr"].jaxpr
    data = {e.invars[0] for e in inner.eqns if e.primitive.name in REUSING and e.invars}
    return {k for k, var in enumerate(inner.invars) if var in data}


def _scan_point(eqn: core.JaxprEqn, loc: str, i: int) -> Point | None:
    length = int(eqn.params["length"])
    default = eqn.params["unroll"]
    if isinstance(default, bool):  # lax.scan stores ints, but be safe
        default = max(length, 1) if default else 1
    values = {u for u in SCAN_UNROLLS if u < length}
    if 1 < length <= FULL_UNROLL_MAX:
        values.add(length)  # unroll=length is what lax.scan's unroll=True becomes
    values.add(int(default))
    if len(values) < 2:
        return None
    in_avals = [v.aval for v in eqn.invars]
    return Point(SCAN, f"{SCAN}@{loc}:len{length}:{aval_list(in_avals)}", i, tuple(sorted(values)), int(default))


def transposable(aval: Any, contract: tuple, batch: tuple) -> tuple[int, int] | None:
    """(contracting dim, free dim) when swapping them physically is well defined and not a no-op."""
    shape = getattr(aval, "shape", None)
    if shape is None or len(contract) != 1 or len(shape) != len(batch) + 2:
        return None
    (c,) = contract
    (f,) = [d for d in range(len(shape)) if d != c and d not in batch]
    if shape[c] == 1 or shape[f] == 1:  # a transpose of a size-1 axis is a bitcast
        return None
    return int(c), int(f)


def _dot_point(eqn: core.JaxprEqn, loc: str, i: int) -> Point | None:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (v.aval for v in eqn.invars)
    values = [LAYOUT_DEFAULT]
    if transposable(lhs, tuple(lc), tuple(lb)):
        values.append(LAYOUT_LHS_T)
    if transposable(rhs, tuple(rc), tuple(rb)):
        values.append(LAYOUT_RHS_T)
    if len(values) < 2:
        return None
    # Its share of the work, to offer the costliest dots first: 2 x the lhs elements x rhs's free elements.
    lhs_shape, rhs_shape = getattr(lhs, "shape", ()), getattr(rhs, "shape", ())
    rhs_free = math.prod(d for k, d in enumerate(rhs_shape) if k not in tuple(rc) and k not in tuple(rb))
    flops = 2 * math.prod(lhs_shape) * rhs_free
    return Point(DOT, f"{DOT}@{loc}:{short_aval(lhs)},{short_aval(rhs)}", i, tuple(values), LAYOUT_DEFAULT,
                 size=int(flops))


def _barrier_points(
    eqn: core.JaxprEqn, c: int, prefix: str, producers: dict[core.Var, int], jaxpr: core.Jaxpr,
    reusing: set[int], at: list[int], every: bool,
) -> Iterator[Point]:
    """Edges into consumer `c`: every operand of a fusible consumer, else only its reusing ones."""
    seen: set[core.Var] = set()
    for k, var in enumerate(eqn.invars):
        if isinstance(var, core.Literal) or var in seen or not (every or k in reusing):
            continue
        seen.add(var)
        p = producers.get(var)
        if p is None:
            continue
        aval = var.aval
        itemsize = _itemsize(getattr(aval, "dtype", None))
        if itemsize is None or not hasattr(aval, "shape"):
            continue
        size = math.prod(aval.shape) * itemsize
        if size == 0:
            continue
        producer = jaxpr.eqns[p].primitive.name
        yield Point(
            BARRIER,
            f"{BARRIER}@{prefix}{at[p]}>{at[c]}:{producer}>{eqn.primitive.name}:{short_aval(aval)}",
            c,
            (False, True),
            False,
            producer=p,
            operand=k,
            size=size,
            reusing=k in reusing,
        )
