"""The program stage: jaxpr rewriting with scan unroll, dot layouts, fusion barriers and user knobs."""

from __future__ import annotations

import re
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from xtat.core.errors import UserError
from xtat.core.space import Decision
from xtat.stages.program import discover, knob, rewrite

KEY = jax.random.PRNGKey(0)


def _rand(shape, k=0):
    return jax.random.normal(jax.random.fold_in(KEY, k), shape, jnp.float32) * 0.5


def _non_default(decisions: list[Decision]) -> dict[str, object]:
    """Every decision at its last non-default value."""
    out = {}
    for d in decisions:
        others = [v for v in d.values if not (v == d.default and type(v) is type(d.default))]
        if others:
            out[d.id] = others[-1]
    return out


def _assert_same(a, b, rtol=1e-5):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-6)


def _kinds(decisions: list[Decision]) -> set[str]:
    return {d.id.split("@")[0].split(":")[0] for d in decisions}


def _scan_eqns(jaxpr):
    """All scan equations at any depth of a (closed) jaxpr."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple) else (value,):
                if hasattr(sub, "eqns") or hasattr(sub, "jaxpr"):
                    yield from _scan_eqns(sub)


# ------------------------------------------------------------------ workloads


def plain_scan(x, w):
    def body(c, xs):
        h = jnp.tanh(c @ w + xs)
        return h * 0.9, jnp.exp(h).sum()

    return lax.scan(body, x[0], x)


def _loss(x, w):
    carry, ys = plain_scan(x, w)
    return jnp.sum(carry**2) + jnp.sum(ys)


grad_of_scan = jax.grad(_loss, argnums=(0, 1))


def cond_in_scan(x, w):
    def body(c, xs):
        c = lax.cond(xs.sum() > 0, lambda z: jnp.tanh(z @ w) * 2.0, lambda z: jnp.exp(-z) + 1.0, c)
        return c, c.sum()

    return lax.scan(body, x[0], x)


def while_loops(x, w):
    n = jnp.int32(3) + (x[0, 0] > 100).astype(jnp.int32)  # traced bound -> a real while

    def body(i, c):
        inner, _ = lax.scan(lambda a, _: (jnp.tanh(a @ w) * 1.5, None), c, None, length=4)
        return jnp.exp(-inner) * 0.5 + c

    y = lax.fori_loop(0, n, body, x)
    z = lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) * 2.0 + 1.0, y)  # static bounds -> scan
    return {"y": y, "z": z}


@jax.custom_vjp
def _scaled_sin(x):
    return jnp.sin(x) * 2.0 + 1.0


def _scaled_sin_fwd(x):
    return _scaled_sin(x), jnp.cos(x)


def _scaled_sin_bwd(cos_x, ct):
    return (3.0 * ct * cos_x,)  # deliberately not the true derivative: it must survive rewriting


_scaled_sin.defvjp(_scaled_sin_fwd, _scaled_sin_bwd)


def custom_vjp_fn(x, w):
    def body(c, _):
        return jnp.tanh(_scaled_sin(c) @ w), None

    c, _ = lax.scan(body, x, None, length=3)
    return jnp.sum(_scaled_sin(c) * 2.0)


@jax.custom_jvp
def _softplus(x):
    return jnp.log1p(jnp.exp(x))


_softplus.defjvp(lambda p, t: (_softplus(p[0]), 5.0 * t[0]))  # deliberately odd rule


def custom_jvp_fn(x, w):
    return jnp.sum(_softplus(jnp.tanh(x @ w) * 2.0))


def checkpointed(x, w):
    @jax.checkpoint
    def block(h):
        def body(c, _):
            return jnp.tanh(c @ w) * 1.1 + 0.1, None

        h, _ = lax.scan(body, h, None, length=6)
        return jnp.exp(h * 0.5) * 2.0

    return jnp.sum(block(x) ** 2)


def nested_jit(x, w):
    @jax.jit
    def inner(h):
        def body(c, _):
            return jnp.tanh(jnp.einsum("ij,jk->ik", c, w)) * 2.0, None

        h, _ = lax.scan(body, h, None, length=5)
        return jnp.exp(h) + 1.0

    return inner(x) * 3.0


def linear_solve(x, w):
    a = jnp.tanh(w) * 0.1 + jnp.eye(4) * 2.0
    return jnp.linalg.solve(a, jnp.exp(x.T) * 2.0).sum(axis=0)  # custom_linear_solve inside


def two_knobs(x, w):
    # Both knobs pick between mathematically equal implementations.
    chunks = knob("chunks", [1, 2, 4], 1)
    order = knob("order", ["xw", "wtx"], "xw")
    h = x @ w if order == "xw" else (w.T @ x.T).T
    parts = jnp.split(h, chunks, axis=0)
    return jnp.concatenate([jnp.tanh(p) for p in parts], axis=0).sum(axis=1)


X = _rand((8, 4), 1)
W = _rand((4, 4), 2) + jnp.eye(4) * 0.5

CASES = {
    "plain_scan": (plain_scan, {"scan", "dot_general", "barrier"}),
    "grad_of_scan": (grad_of_scan, {"scan", "dot_general", "barrier"}),
    "cond_in_scan": (cond_in_scan, {"scan", "barrier"}),
    "while_loops": (while_loops, {"scan", "barrier"}),
    "custom_vjp": (custom_vjp_fn, {"scan", "barrier"}),
    "custom_jvp": (custom_jvp_fn, {"dot_general", "barrier"}),
    "checkpoint": (checkpointed, {"scan", "barrier"}),
    "nested_jit": (nested_jit, {"scan", "barrier"}),
    "linear_solve": (linear_solve, {"barrier"}),
    "two_knobs": (two_knobs, {"knob", "dot_general", "barrier"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_decision_non_default_keeps_outputs(name):
    fn, kinds = CASES[name]
    decisions = discover(fn, (X, W))
    assert kinds <= _kinds(decisions), [d.id for d in decisions]
    assert all(d.stage == "program" and d.default in d.values for d in decisions)
    chosen = _non_default(decisions)
    assert chosen
    rewritten = rewrite(fn, chosen)
    _assert_same(fn(X, W), jax.jit(rewritten)(X, W))


@pytest.mark.parametrize(
    "name", ["plain_scan", "custom_vjp", "custom_jvp", "checkpoint", "nested_jit", "linear_solve"]
)
def test_grad_through_rewritten(name):
    fn, _ = CASES[name]
    rewritten = rewrite(fn, _non_default(discover(fn, (X, W))))

    def loss(f):
        return lambda x, w: jnp.sum(jax.tree.leaves(f(x, w))[0])

    expected = jax.jit(jax.grad(loss(fn), argnums=(0, 1)))(X, W)
    got = jax.jit(jax.grad(loss(rewritten), argnums=(0, 1)))(X, W)
    _assert_same(expected, got)


def test_custom_derivative_rules_are_kept():
    # The deliberately odd rules give gradients that differ from autodiff; they must survive.
    for fn, rule in (
        (lambda x: jnp.sum(_scaled_sin(jnp.tanh(x) * 2.0)), lambda x: 3.0 * jnp.cos(jnp.tanh(x) * 2.0)),
        (lambda x: jnp.sum(_softplus(jnp.tanh(x) * 2.0)), lambda x: 5.0 + 0.0 * x),
    ):
        decisions = _non_default(discover(fn, (X,)))
        assert any(re.match(r"barrier@\d+\.0/", i) for i in decisions)  # inside the custom call
        rewritten = rewrite(fn, decisions)
        chain = 2.0 * (1.0 - jnp.tanh(X) ** 2)
        np.testing.assert_allclose(jax.jit(jax.grad(rewritten))(X), rule(X) * chain, rtol=1e-5)


def test_ids_stable_across_fresh_traces():
    def build():
        def fn(x, w):
            def body(c, xs):
                c = lax.cond(xs.sum() > 0, lambda z: jnp.tanh(z @ w), lambda z: jnp.exp(-z), c)
                return c * 2.0, c.sum()

            y = jax.jit(lambda a: lax.scan(body, a[0], a))(x)
            k = knob("k", [1, 2], 1)
            return y[0] * k, jax.checkpoint(lambda z: jnp.sin(z) * 3.0)(y[1])

        return fn

    first = discover(build(), (X, W))
    second = discover(build(), (X.copy(), W.copy()))
    assert [d.id for d in first] == [d.id for d in second]
    assert first == second
    assert len({d.id for d in first}) == len(first)
    # nested locations appear in the ids
    assert any(re.match(r"scan@\d+\.\d+/\d+:", d.id) for d in first)
    assert any(re.match(r"barrier@\d+\.\d+/\d+\.\d+/\d+\.\d+/\d+>\d+:", d.id) for d in first)


def test_scan_unroll_is_applied():
    decisions = discover(nested_jit, (X, W))
    scan = next(d for d in decisions if d.id.startswith("scan@"))
    assert scan.default == 1
    assert scan.values == (1, 2, 4, 5)  # < length, plus length itself (full unroll)
    for value, expected in ((4, 4), (True, 5)):
        jaxpr = jax.make_jaxpr(rewrite(nested_jit, {scan.id: value}))(X, W)
        assert [e.params["unroll"] for e in _scan_eqns(jaxpr)] == [expected]
    assert [e.params["unroll"] for e in _scan_eqns(jax.make_jaxpr(nested_jit)(X, W))] == [1]


def test_scan_values_for_long_loops():
    fn = lambda x: lax.scan(lambda c, _: (c * 0.5, None), x, None, length=100)[0]  # noqa: E731
    (scan,) = discover(fn, (X,), max_barriers=0)
    assert scan.values == (1, 2, 4, 8, 16)  # no full unroll beyond length 64


def test_dot_layouts_keep_results_with_batch_dims():
    a, b = _rand((3, 5, 6), 3), _rand((3, 6, 7), 4)
    fn = lambda a, b: jnp.einsum("bij,bjk->bik", a, b)  # noqa: E731
    (dot,) = [d for d in discover(fn, (a, b)) if d.id.startswith("dot_general@")]
    assert dot.values == ("default", "lhs_t", "rhs_t")
    for value in dot.values:
        rewritten = rewrite(fn, {dot.id: value})
        text = str(jax.make_jaxpr(rewritten)(a, b))
        assert ("transpose" in text) == (value != "default")
        _assert_same(fn(a, b), jax.jit(rewritten)(a, b))


def test_a_shape_class_of_dots_is_one_decision_before_its_dots_and_each_dot_overrides_it():
    w1, w2, v = _rand((16, 16), 5), _rand((16, 16), 6), _rand((16, 8), 7)

    def fn(x):  # two dots of one class (one inside a scan), and one of another
        y = x @ w1
        y = lax.scan(lambda c, _: (jnp.tanh(c @ w2), None), y, None, length=3)[0]
        return y @ v

    x = _rand((4, 16), 8)
    dots = [d for d in discover(fn, (x,), max_barriers=0) if d.id.startswith("dot_general@")]
    group = "dot_general@*:f32[4,16],f32[16,16]"
    assert [d.id for d in dots][0] == group and len(dots) == 4  # the group first, then each of the three
    assert dots[0].values == ("default", "lhs_t", "rhs_t")
    members = [d.id for d in dots[1:] if d.id.endswith(":f32[4,16],f32[16,16]")]
    assert len(members) == 2

    def transposes(decisions):
        return str(jax.make_jaxpr(rewrite(fn, decisions))(x)).count("transpose[")

    assert transposes({}) == 0
    assert transposes({group: "rhs_t"}) == 2  # both members, the nested one included
    assert transposes({group: "rhs_t", members[0]: "default"}) == 1  # a dot's own decision wins
    _assert_same(fn(x), jax.jit(rewrite(fn, {group: "lhs_t"}))(x))
    with pytest.raises(UserError, match="not in this program"):
        rewrite(fn, {"dot_general@*:f32[9,9],f32[9,9]": "rhs_t"})(x)


def test_barriers_ranked_and_capped():
    def fn(x):
        s = jnp.sum(jnp.exp(x), axis=1)  # a small (reduced) edge follows
        return jnp.tanh(s) * 2.0 + jnp.exp(x).mean()

    all_ = [d for d in discover(fn, (X,), max_barriers=100) if d.id.startswith("barrier@")]
    top = [d for d in discover(fn, (X,), max_barriers=2) if d.id.startswith("barrier@")]
    assert len(all_) > 2 and len(top) == 2
    assert all(re.search(r":f32\[8,4\]$", d.id) for d in top)  # the largest edges win
    assert discover(fn, (X,), max_barriers=0) == []
    with pytest.raises(UserError, match="max_barriers"):
        discover(fn, (X,), max_barriers=-1)


def test_edges_into_data_reusing_consumers_rank_first_and_keep_results():
    table, ids = _rand((64,), 6), jnp.asarray(np.arange(200) % 64, jnp.int32)

    def fn(table, ids):
        acc = table
        for k in range(6):
            acc = acc * table + 0.1 * k
        return jnp.take(acc, ids) + acc[ids[::-1]]  # gather inside jnp.take's jit, and a direct one

    [first, second] = [d.id for d in discover(fn, (table, ids), max_barriers=2)]
    assert ">jit:f32[64]" in first and ">gather:f32[64]" in second  # the 6 mul/add edges rank after
    assert not any(":i32[" in d.id for d in discover(fn, (table, ids), max_barriers=100)
                   if d.id.startswith("barrier@") and "gather" in d.id)  # never the indices edge
    fenced = rewrite(fn, {first: True, second: True})
    compiled = jax.jit(fenced).lower(table, ids).compile(
        compiler_options={"xla_disable_hlo_passes": "cse_barrier_expander"})
    assert "opt-barrier" in compiled.as_text()  # (CSE merges the two fences of one value)
    _assert_same(fn(table, ids), compiled(table, ids), rtol=1e-6)


def _hlo_ops(text: str) -> str:
    """Optimized HLO without metadata (which names call sites and so differs per caller)."""
    body = text[text.index("\n%") :] if "\n%" in text else text
    return re.sub(r",? metadata=\{[^}]*\}", "", body)


def test_fusion_barrier_needs_cse_barrier_expander_disabled():
    def fn(x):
        return jnp.sum(jnp.exp(jnp.tanh(x) * 2.0), axis=1)

    x = _rand((64, 32), 5)
    barrier = next(d.id for d in discover(fn, (x,)) if ":tanh>mul:" in d.id)
    off = rewrite(fn, {barrier: False})
    on = rewrite(fn, {barrier: True})

    def compile_(f, options):
        return jax.jit(f).lower(x).compile(compiler_options=options)

    keep = {"xla_disable_hlo_passes": "cse_barrier_expander"}
    c_off, c_on = compile_(off, keep), compile_(on, keep)
    assert "opt-barrier" in c_on.as_text() and "opt-barrier" not in c_off.as_text()
    assert _hlo_ops(c_on.as_text()) != _hlo_ops(c_off.as_text())
    _assert_same(c_off(x), c_on(x), rtol=1e-6)
    _assert_same(fn(x), c_on(x), rtol=1e-6)
    # With the pass at work (the CPU default) the barrier is stripped: same program.
    assert _hlo_ops(compile_(on, {}).as_text()) == _hlo_ops(compile_(off, {}).as_text())


def test_rewritten_under_jit_and_export():
    decisions = _non_default(discover(plain_scan, (X, W)))
    rewritten = rewrite(plain_scan, decisions)
    expected = plain_scan(X, W)
    _assert_same(expected, rewritten(X, W))  # eager, op by op
    _assert_same(expected, jax.jit(rewritten)(X, W))
    exported = jax.export.export(jax.jit(rewritten))(X, W)
    _assert_same(expected, exported.call(X, W))
    restored = jax.export.deserialize(exported.serialize())
    _assert_same(expected, restored.call(X, W))


def test_signature_pytrees_kwargs_and_static_values():
    def fn(params, x, *, scale, parts):
        h = jnp.tanh(x @ params["w"]) * scale
        chunks = jnp.split(h, parts)  # parts must stay a Python int
        return {"out": jnp.exp(jnp.concatenate(chunks)), "aux": (h.sum(), x)}

    params = {"w": W}
    with pytest.raises(jax.errors.ConcretizationTypeError):
        discover(fn, (params, X), {"scale": 2.0, "parts": 2})  # like jax.jit(fn): parts is traced
    decisions = discover(partial(fn, scale=2.0, parts=2), (params, X))
    rewritten = rewrite(fn, _non_default(decisions))
    assert rewritten.__name__ == "fn"
    expected = fn(params, X, scale=2.0, parts=2)
    _assert_same(expected, rewritten(params, X, scale=2.0, parts=2))
    jitted = jax.jit(rewritten, static_argnames=("scale", "parts"))
    _assert_same(expected, jitted(params, X, scale=2.0, parts=2))


def test_python_scalars_are_traced_like_jit():
    def fn(x, lr):
        return jnp.exp(x * (lr * 0.5)) * 2.0  # lr * 0.5 is an equation only when lr is traced

    decisions = discover(fn, (X, 0.1))
    assert decisions[0].id == "barrier@0>1:mul>convert_element_type:f32[]"  # lr * 0.5 is traced
    rewritten = rewrite(fn, _non_default(decisions))
    _assert_same(fn(X, 0.1), jax.jit(rewritten)(X, 0.1))
    exported = jax.export.export(jax.jit(rewritten))(X, 0.1)
    _assert_same(fn(X, 0.1), exported.call(X, 0.1))


# ------------------------------------------------------------------ knobs


def test_knob_values_are_applied():
    seen = []

    def fn(x, w):
        seen.append((knob("chunks", [1, 2, 4], 1), knob("order", ["xw", "wtx"], "xw")))
        return two_knobs(x, w)

    decisions = discover(fn, (X, W))
    knobs = [d for d in decisions if d.id.startswith("knob:")]
    assert knobs == [
        Decision("program", "knob:chunks", (1, 2, 4), 1),
        Decision("program", "knob:order", ("xw", "wtx"), "xw"),
    ]
    assert seen[-1] == (1, "xw")
    jax.jit(rewrite(fn, {"knob:chunks": 4, "knob:order": "wtx"}))(X, W)
    assert seen[-1] == (4, "wtx")
    rewrite(fn, {"knob:order": "wtx"})(X, W)
    assert seen[-1] == (1, "wtx")  # unnamed knobs take their default
    assert knob("chunks", [1, 2, 4], 2) == 2  # outside any tuning context: the default


def test_knobs_change_the_program_and_its_decisions():
    def fn(x, w):
        if knob("fused", [True, False], True):
            return jnp.tanh(x @ w).sum(axis=1)
        chunk = knob("chunk", [2, 4], 2)  # only read on this path
        return jnp.concatenate([jnp.tanh(p @ w) for p in jnp.split(x, chunk)]).sum(axis=1)

    default = discover(fn, (X, W))
    assert [d.id for d in default if d.id.startswith("knob:")] == ["knob:fused"]
    split = discover(fn, (X, W), knobs={"fused": False})
    assert [d.id for d in split if d.id.startswith("knob:")] == ["knob:fused", "knob:chunk"]
    assert {d.id for d in split} != {d.id for d in default}
    expected = fn(X, W)
    # ids of the knob-specific program apply with those knob values...
    chosen = {i: v for i, v in _non_default(split).items() if not i.startswith("knob:")}
    _assert_same(expected, jax.jit(rewrite(fn, {**chosen, "knob:fused": False}))(X, W))
    # ...not with others (chunk=4 makes another program).
    with pytest.raises(UserError, match="not in this program"):
        rewrite(fn, {**chosen, "knob:fused": False, "knob:chunk": 4})(X, W)
    # ...ids of the default program are inactive there, not errors...
    mixed = {**_non_default(default), "knob:fused": False}
    _assert_same(expected, jax.jit(rewrite(fn, mixed))(X, W))
    # ...and a knob that neither the chosen nor the default program reads is unknown.
    with pytest.raises(UserError, match="knob:chunk"):
        rewrite(fn, {"knob:chunk": 4})(X, W)
    with pytest.raises(UserError, match="not one of its choices"):
        rewrite(fn, {"knob:fused": False, "knob:chunk": 3})(X, W)
    with pytest.raises(UserError, match="knob:nope"):
        discover(fn, (X, W), knobs={"nope": 1})


@pytest.mark.parametrize(
    "choices, default, message",
    [
        ([], None, "choices are empty"),
        ([[1]], [1], "is not hashable"),
        ([1, 2], 3, "default 3 is not one of the choices"),
        ([1, True], 1, "duplicates"),
        ("ab", "a", "must be a list or tuple"),
        ([(1, 2)], (1, 2), "JSON"),
    ],
)
def test_knob_errors(choices, default, message):
    with pytest.raises(UserError, match=message) as outside:
        knob("tile", choices, default)
    assert "'tile'" in str(outside.value)

    def fn(x):
        return x * knob("tile", choices, default)

    with pytest.raises(UserError, match=message):
        discover(fn, (X,))


def test_knob_conflicts_and_unknown_values():
    def conflicting(x):
        return x * knob("k", [1, 2], 1) + knob("k", [1, 3], 1)

    with pytest.raises(UserError, match="declared twice"):
        discover(conflicting, (X,))

    def fn(x):
        return x * knob("k", [1, 2], 1)

    with pytest.raises(UserError, match="not one of its choices"):
        rewrite(fn, {"knob:k": 5})(X)
    with pytest.raises(UserError, match="knob:nope"):
        rewrite(fn, {"knob:nope": 1})(X)


# ------------------------------------------------------------------ refusals


def test_unknown_decisions_and_values_are_refused():
    with pytest.raises(UserError, match="unknown program decision 'bogus'"):
        rewrite(plain_scan, {"bogus": 1})
    with pytest.raises(UserError, match="not in this program"):
        rewrite(plain_scan, {"scan@99:len8:f32[4]": 2})(X, W)
    scan = next(d.id for d in discover(plain_scan, (X, W)) if d.id.startswith("scan@"))
    with pytest.raises(UserError, match="is not one of"):
        rewrite(plain_scan, {scan: 3})(X, W)


def test_effects_are_refused():
    def printing(x):
        jax.debug.print("x = {}", x.sum(), ordered=True)
        return x * 2.0

    with pytest.raises(UserError, match=r"side effects \(.*ordered"):
        discover(printing, (X,))
    with pytest.raises(UserError, match="side effects"):
        rewrite(printing, {})(X)

    def callback(x):
        jax.experimental.io_callback(lambda v: None, None, x, ordered=True)
        return x + 1.0

    with pytest.raises(UserError, match=r"'io_callback'.*side effects"):
        discover(callback, (X,))

    def print_in_loop(x):
        def body(c, _):
            jax.debug.print("c = {}", c.sum())  # unordered, still refused
            return c * 2.0, None

        return lax.scan(body, x, None, length=3)[0]

    with pytest.raises(UserError, match=r"'debug_print' at 0\.0/\d+ has side effects"):
        discover(print_in_loop, (X,))


def test_unsupported_higher_order_primitive_is_named():
    @jax.custom_batching.custom_vmap
    def doubled_sin(x):
        return jnp.sin(x) * 2.0

    doubled_sin.def_vmap(lambda axis_size, in_batched, xs: (doubled_sin(xs), True))
    with pytest.raises(UserError, match="'custom_vmap_call'.*tune without the program stage"):
        discover(doubled_sin, (X,))
