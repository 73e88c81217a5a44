"""The program stage: discover decision points in a traced jaxpr and re-emit it with them applied.

`rewrite(fn, decisions)` returns a function that, each time it is traced,
traces `fn` to a jaxpr (with the chosen knob values in effect) and then
interprets that jaxpr equation by equation, binding every primitive on the
caller's trace (eager, jit, grad, export...). Equations that own nested jaxprs
(scan, while, cond, jit, checkpoint, custom_jvp/vjp, custom_linear_solve,
closed_call) get those jaxprs re-traced through the same interpreter when a
decision applies inside them, and are then bound with the new params. Custom derivative rules are kept
as they were: only the primal `call_jaxpr` is rewritten.

Decision ids are documented in `points.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax import lax
from jax._src import core, effects, source_info_util
from jax._src import linear_util as lu
from jax._src.interpreters import partial_eval as pe
from jax.tree_util import PyTreeDef, tree_flatten, tree_structure, tree_unflatten

from xtat.core.errors import UserError
from xtat.core.space import Decision
from xtat.stages.program import points as pts
from xtat.stages.program.knobs import KNOB_PREFIX, KnobCall, index_of, knob_session

STAGE = "program"

# Primitives with nested jaxprs whose params we know how to rebuild: each keeps
# its nested jaxprs' in/out avals, so swapping in a re-traced jaxpr is valid.
# ("pjit" is the pre-0.7 name of "jit".)
SUPPORTED_HIGHER_ORDER = frozenset(
    {
        "scan", "while", "cond", "jit", "pjit", "closed_call", "call", "remat2",
        "custom_jvp_call", "custom_vjp_call", "custom_linear_solve",
        # Their nested update_jaxpr is the scalar combiner, re-bound unchanged.
        "scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max",
    }
)


@dataclass(frozen=True)
class Traced:
    """fn traced at some arguments: the flat program and how to rebuild its outputs."""

    jaxpr: core.ClosedJaxpr
    out_tree: PyTreeDef
    knobs: tuple[KnobCall, ...]
    inputs: tuple[Any, ...]  # the array leaves, in the order of jaxpr.invars


def discover(
    fn: Callable,
    args: tuple,
    kwargs: dict | None = None,
    *,
    max_barriers: int = 16,
    knobs: Mapping[str, object] | None = None,
) -> list[Decision]:
    """Decision points of fn traced at these args (stage="program").

    Order: knobs (in the order the code first reads them), then scans in
    program order, dot layout groups (every dot of one shape class at once,
    for classes of two or more) and then single dots' layouts, each by FLOPs
    (costliest first), then fusion
    barriers in program order. Barrier edges are ranked (edges into
    data-reusing consumers such as gather first, then by the bytes that cross
    them) and only the `max_barriers` first are kept.

    `knobs` ({name: value}) traces the program those knob values produce, for
    a staged search that freezes knobs before tuning the rest; by default the
    knobs take their defaults.

    fn is traced as `jax.jit(fn)(*args, **kwargs)` would trace it: array and
    Python scalar leaves are inputs (other leaves are static).

    Raises UserError when the program cannot be rewritten: a primitive with
    nested jaxprs we do not know, or any side effect (ordered or not)."""
    if isinstance(max_barriers, bool) or not isinstance(max_barriers, int) or max_barriers < 0:
        raise UserError(f"max_barriers must be a non-negative int, got {max_barriers!r}")
    traced = trace(fn, tuple(args), dict(kwargs or {}), dict(knobs or {}), trace_scalars=True)
    _check_knobs_known(knobs or {}, traced)
    check_program(traced.jaxpr.jaxpr)
    decisions = [Decision(STAGE, k.decision_id, k.choices, k.default) for k in traced.knobs]
    points = list(walk_points(traced.jaxpr.jaxpr))
    # Edges into data-reusing consumers first, then by size; sorted() is stable, so ties keep program order.
    barriers = sorted((p for p in points if p.kind == pts.BARRIER),
                      key=lambda p: (not p.reusing, -p.size))[:max_barriers]
    # Dots by their FLOPs, costliest first (their share of the run time: the ones worth a compile first).
    dots = sorted((p for p in points if p.kind == pts.DOT), key=lambda p: -p.size)
    scans = [p for p in points if p.kind not in (pts.BARRIER, pts.DOT)]
    kept = [p for p in points if p.kind == pts.BARRIER and p.id in {b.id for b in barriers}]  # in program order
    # A shape class's dots are tried at once before any is tried alone (one compile for many).
    decisions += [Decision(STAGE, p.id, p.values, p.default) for p in (*scans, *pts.groups(dots), *dots, *kept)]
    return decisions


def rewrite(fn: Callable, decisions: Mapping[str, object]) -> Callable:
    """A function with fn's signature and outputs, computed with `decisions` applied.

    Decisions not named keep their default. Ids are checked against the
    program when the returned function is traced (the program depends on the
    arguments' shapes): an id that does not exist there, or a value it does
    not offer, raises UserError. Scan ids also accept `True` for a full unroll.

    The returned function traces the array leaves it receives (tracers under
    jit/grad/export) and keeps other leaves static, so Python scalars passed
    through `static_argnums` stay Python values. Python scalars passed
    *eagerly* are static too, which can give a different program than
    discover() saw: call it under jax.jit, as the tuner does.

    Knob values can change the program itself, and with it the structural
    decision points. A structural id that exists in the program traced with
    default knobs but not in the one the chosen knobs produce is inactive and
    ignored (as discover() would not offer it for those knobs).
    """
    if not isinstance(decisions, Mapping):
        raise UserError(f"program decisions must be a mapping {{decision id: value}}, got {decisions!r}")
    knob_values: dict[str, object] = {}
    structural: dict[str, object] = {}
    for decision_id, value in decisions.items():
        if isinstance(decision_id, str) and decision_id.startswith(KNOB_PREFIX):
            knob_values[decision_id[len(KNOB_PREFIX) :]] = value
        elif isinstance(decision_id, str) and pts.id_location(decision_id) is not None:
            structural[decision_id] = value
        else:
            raise UserError(
                f"unknown program decision {decision_id!r}: ids look like 'knob:<name>', "
                "'scan@<loc>:...', 'dot_general@<loc>:...' or 'barrier@<loc>:...'; see discover()"
            )

    @functools.wraps(fn)
    def rewritten(*args: Any, **kwargs: Any) -> Any:
        traced = trace(fn, args, kwargs, knob_values)
        check_program(traced.jaxpr.jaxpr)
        rewriter = Rewriter(structural)
        outs = rewriter.eval(traced.jaxpr.jaxpr, traced.jaxpr.consts, list(traced.inputs), "")
        unseen_knobs = {n: v for n, v in knob_values.items() if n not in {k.name for k in traced.knobs}}
        unused = set(structural) - rewriter.used
        if (unseen_knobs or unused) and knob_values:
            # Inactive rather than unknown if the default-knob program has them.
            default = trace(fn, args, kwargs, {})
            _check_knobs_known(unseen_knobs, default)
            unseen_knobs = {}
            unused -= known_ids(default.jaxpr.jaxpr)
        _check_knobs_known(unseen_knobs, traced)
        if unused:
            missing = sorted(unused)
            known = sorted(known_ids(traced.jaxpr.jaxpr))
            raise UserError(
                f"unknown program decision(s) {missing}: not in this program as traced at these arguments; "
                f"it has {len(known)} structural decision(s){': ' + ', '.join(known[:8]) if known else ''}"
                f"{' ...' if len(known) > 8 else ''}"
            )
        return tree_unflatten(traced.out_tree, outs)

    return rewritten


# ---------------------------------------------------------------- tracing


def trace(
    fn: Callable, args: tuple, kwargs: dict, knob_values: Mapping[str, object], *, trace_scalars: bool = False
) -> Traced:
    """Trace fn with the given knob values in effect.

    Array leaves (jax/numpy arrays, tracers) become the program's inputs, and
    so do Python scalars when `trace_scalars` (what `jax.jit(fn)` does, and
    what the tuner's export does). Every other leaf stays a static value, as
    it arrives: that lets the rewritten function compose with
    `jax.jit(..., static_argnums=...)`."""
    leaves, in_tree = tree_flatten((args, kwargs))
    scalar_types = (bool, int, float, complex) if trace_scalars else ()
    dynamic = [i for i, leaf in enumerate(leaves) if _is_array(leaf) or isinstance(leaf, scalar_types)]

    def flat_fn(*flat: Any) -> Any:
        full = list(leaves)
        for i, x in zip(dynamic, flat):
            full[i] = x
        a, k = tree_unflatten(in_tree, full)
        return fn(*a, **k)

    inputs = tuple(leaves[i] for i in dynamic)
    with knob_session(knob_values) as session:
        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*inputs)
    return Traced(closed, tree_structure(out_shape), tuple(session.seen.values()), inputs)


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic, core.Tracer))


def _check_knobs_known(knob_values: Mapping[str, object], traced: Traced) -> None:
    """Every named knob is read by the traced program and offers the chosen value."""
    seen = {k.name: k for k in traced.knobs}
    unknown = sorted(set(knob_values) - set(seen))
    if unknown:
        raise UserError(
            f"unknown program decision(s) {[KNOB_PREFIX + n for n in unknown]}: "
            f"the function reads the knobs {sorted(seen) or 'none'}"
        )
    for name, value in knob_values.items():
        if index_of(seen[name].choices, value) is None:
            raise UserError(
                f"config value {value!r} for knob {name!r} is not one of its choices {list(seen[name].choices)}"
            )


def check_program(jaxpr: core.Jaxpr, prefix: str = "") -> None:
    """Raise UserError if some equation (at any depth) cannot be re-emitted faithfully."""
    at = pts.locations(jaxpr)
    for i, eqn in enumerate(jaxpr.eqns):
        name = eqn.primitive.name
        subs = pts.sub_jaxprs(eqn)
        if subs and name not in SUPPORTED_HIGHER_ORDER:
            raise UserError(
                f"the program stage cannot rewrite this function: primitive {name!r} at {prefix}{at[i]} holds "
                f"nested jaxprs whose params it does not know how to rebuild (supported: "
                f"{', '.join(sorted(SUPPORTED_HIGHER_ORDER))}); tune without the program stage"
            )
        # Nested first, so that the error names the primitive that has the effect, not its loop.
        for k, (_, _, sub) in enumerate(subs):
            check_program(_open(sub), f"{prefix}{at[i]}.{k}/")
        if eqn.effects:
            kinds = ", ".join(
                sorted(
                    f"{type(e).__name__}{' (ordered)' if effects.ordered_effects.contains(e) else ''}"
                    for e in eqn.effects
                )
            )
            raise UserError(
                f"the program stage cannot rewrite this function: primitive {name!r} at {prefix}{at[i]} has side "
                f"effects ({kinds}). Tuning re-traces and re-runs the program many times, in other processes, "
                "which would repeat or reorder them; remove jax.debug.print / callbacks from the tuned "
                "function, or tune without the program stage"
            )


def walk_points(jaxpr: core.Jaxpr, prefix: str = "") -> Iterator[pts.Point]:
    """All decision points at any depth, in program order (pre-order)."""
    by_eqn: dict[int, list[pts.Point]] = {}
    for point in pts.level_points(jaxpr, prefix):
        by_eqn.setdefault(point.eqn, []).append(point)
    at = pts.locations(jaxpr)
    for i, eqn in enumerate(jaxpr.eqns):
        yield from by_eqn.get(i, ())
        for k, (_, _, sub) in enumerate(pts.sub_jaxprs(eqn)):
            yield from walk_points(_open(sub), f"{prefix}{at[i]}.{k}/")


def known_ids(jaxpr: core.Jaxpr) -> set[str]:
    """Every structural decision id of the program: its points' and its dot groups'."""
    points = list(walk_points(jaxpr))
    return {p.id for p in points} | {p.id for p in pts.groups(points)}


def _open(jaxpr: core.Jaxpr | core.ClosedJaxpr) -> core.Jaxpr:
    return jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr


# ---------------------------------------------------------------- interpreter


class Rewriter:
    """Re-emits jaxprs with structural decisions applied, for one trace.

    `used` collects the ids that matched a decision point, so the caller can
    reject ids that exist nowhere in the program."""

    def __init__(self, chosen: Mapping[str, object]) -> None:
        self.chosen = dict(chosen)
        self.locations = {i: pts.id_location(i) or "" for i in self.chosen}
        self.used: set[str] = set()

    def _has_decisions_under(self, prefix: str) -> bool:
        return any(loc == pts.EVERYWHERE or loc.startswith(prefix) for loc in self.locations.values())

    def eval(self, jaxpr: core.Jaxpr, consts: list[Any], args: list[Any], prefix: str) -> list[Any]:
        env: dict[core.Var, Any] = {}

        def read(v: Any) -> Any:
            return v.val if isinstance(v, core.Literal) else env[v]

        for var, val in zip(jaxpr.constvars, consts):
            env[var] = val
        for var, val in zip(jaxpr.invars, args):
            env[var] = val

        unroll, layout, barriers = self._plan(jaxpr, prefix) if self._has_decisions_under(prefix) else ({}, {}, {})
        at = pts.locations(jaxpr)
        for i, eqn in enumerate(jaxpr.eqns):
            params = dict(eqn.params)
            subs = pts.sub_jaxprs(eqn)
            if subs:
                new = {}
                for k, (name, index, sub) in enumerate(subs):
                    sub_prefix = f"{prefix}{at[i]}.{k}/"
                    if self._has_decisions_under(sub_prefix):
                        new[(name, index)] = self._retrace(sub, sub_prefix)
                params = pts.replace_sub_jaxprs(params, new)
            if i in unroll:
                params["unroll"] = unroll[i]
            name_stack = source_info_util.current_name_stack() + eqn.source_info.name_stack
            with (
                source_info_util.user_context(eqn.source_info.traceback, name_stack=name_stack),
                eqn.ctx.manager,
            ):
                invals = [read(v) for v in eqn.invars]
                if i in barriers:
                    # One barrier per (edge, consumer): only this consumer sees the fenced value.
                    fenced = {v: lax.optimization_barrier(env[v]) for v in barriers[i]}
                    invals = [
                        x if isinstance(v, core.Literal) else fenced.get(v, x) for v, x in zip(eqn.invars, invals)
                    ]
                if i in layout:
                    invals, params = _relayout(eqn, invals, params, layout[i])
                ans = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
            outs = ans if eqn.primitive.multiple_results else [ans]
            for var, val in zip(eqn.outvars, outs):
                if not isinstance(var, core.DropVar):
                    env[var] = val
        return [read(v) for v in jaxpr.outvars]

    def _plan(
        self, jaxpr: core.Jaxpr, prefix: str
    ) -> tuple[dict[int, int], dict[int, str], dict[int, set[core.Var]]]:
        """The decisions of this jaxpr level: scan unrolls, dot layouts, fenced edges by consumer."""
        unroll: dict[int, int] = {}
        layout: dict[int, str] = {}
        barriers: dict[int, set[core.Var]] = {}
        for point in pts.level_points(jaxpr, prefix):
            # A dot's own decision, else its shape class's (a group offers only what every member does).
            named = [i for i in (point.id, pts.group_id(point)) if i in self.chosen]
            if not named:
                continue
            self.used.update(named)
            chosen_id = named[0]
            value = _checked(point, self.chosen[chosen_id], jaxpr.eqns[point.eqn])
            if value == point.default and type(value) is type(point.default):
                continue
            if point.kind == pts.SCAN:
                assert isinstance(value, int)  # a count, or True (full unroll; a bool is an int)
                unroll[point.eqn] = value
            elif point.kind == pts.DOT:
                assert isinstance(value, str)
                layout[point.eqn] = value
            elif point.kind == pts.BARRIER:
                # The consumer's operand: the producer's output, or a layout's constraint of it.
                operand = jaxpr.eqns[point.eqn].invars[point.operand]
                assert isinstance(operand, core.Var)  # an edge has a producer: never a literal
                barriers.setdefault(point.eqn, set()).add(operand)
        return unroll, layout, barriers

    def _retrace(
        self, sub: core.Jaxpr | core.ClosedJaxpr, prefix: str
    ) -> core.Jaxpr | core.ClosedJaxpr:
        """The nested jaxpr re-traced through this interpreter; same in/out avals."""
        if isinstance(sub, core.ClosedJaxpr):
            inner, consts = sub.jaxpr, list(sub.consts)
        else:
            if sub.constvars:
                raise UserError(f"the program stage cannot rewrite an open nested jaxpr with constants at {prefix}")
            inner, consts = sub, []
        in_avals = [v.aval for v in inner.invars]

        def body(*args: Any) -> list[Any]:
            return self.eval(inner, consts, list(args), prefix)

        new, _, new_consts = pe.trace_to_jaxpr_dynamic(lu.wrap_init(body, debug_info=inner.debug_info), in_avals)
        if isinstance(sub, core.ClosedJaxpr):
            return core.ClosedJaxpr(new, new_consts)
        if new_consts:  # an open jaxpr (remat2, call) cannot carry constants
            raise UserError(f"the program stage cannot rewrite the nested jaxpr at {prefix}: it gained constants")
        return new


def _checked(point: pts.Point, value: object, eqn: core.JaxprEqn) -> object:
    """The value to apply, or UserError if the point does not offer it."""
    if point.kind == pts.SCAN and value is True:
        length = int(eqn.params["length"])
        if length <= pts.FULL_UNROLL_MAX:
            return length  # lax.scan turns unroll=True into unroll=length too
    for offered in point.values:
        if type(offered) is type(value) and offered == value:
            return value
    raise UserError(f"value {value!r} for program decision {point.id} is not one of {list(point.values)}")


def _relayout(eqn: core.JaxprEqn, invals: list[Any], params: dict, which: str) -> tuple[list[Any], dict]:
    """Materialise a copy of one dot operand with its contracting and free axes swapped.

    The dimension numbers are adjusted so the dot computes the same result:
    the contracting axis now sits where the free axis was, and since the
    operand has a single free axis the result's axis order is unchanged."""
    (lc, rc), batch = params["dimension_numbers"]
    side = 0 if which == pts.LAYOUT_LHS_T else 1
    contract = (lc, rc)[side]
    dims = pts.transposable(eqn.invars[side].aval, tuple(contract), tuple(batch[side]))
    assert dims is not None, "a layout point exists only for transposable operands"
    c, f = dims
    perm = list(range(len(eqn.invars[side].aval.shape)))  # type: ignore[attr-defined]  # a Var's aval is typed abstractly by jax
    perm[c], perm[f] = f, c
    invals = list(invals)
    invals[side] = lax.transpose(invals[side], perm)
    new_contract = ((f,), tuple(rc)) if side == 0 else (tuple(lc), (f,))
    return invals, {**params, "dimension_numbers": (new_contract, batch)}
