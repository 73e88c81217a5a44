"""`xtat.jit` is `jax.jit`: every case runs under both and must give the same outcome.

An outcome is the returned values (pytree structure, dtypes, shapes, values),
or the exception's type and message, plus the warnings raised along the way
(xtat's own "compiling with XLA defaults" note aside) and how many times the
user's function was traced. Each case runs in two modes:

- `defaults`: the store has no record, so xtat.jit compiles with XLA's defaults;
- `adopted`: `AdoptEverything`, a test double of the store lookup, adopts
  compile options for every program, so every signature takes the tuned
  path; top-level calls must then be served by the tuned `jax.jit`;
- `adopted-python-frame`: the same, as on a jax whose staging rule
  `nesting.py` cannot wrap: optioned entries keep a Python frame that
  retries a nested call without the options.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import re
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import xtat
import xtat.apply.jit as xtat_jit
from xtat.apply.lookup import Found, Lookup
from xtat.build.builder import executable_identity
from xtat.capture.workload import canonical_program
from xtat.core.candidate import Candidate

# The pass makes a program with a long 1-D sum another program on any CPU (the codegen options may
# change nothing on some CPUs: issue 29).
OPTIONS = {"xla_cpu_prefer_vector_width": 128, "xla_backend_optimization_level": 2,
           "xla_disable_hlo_passes": "tree_reduction_rewriter"}


class AdoptEverything:
    """Test double of `lookup`: every program has an adopted config with OPTIONS."""

    def __call__(self, identity: Any, db: Any) -> Lookup:
        return Lookup(Found.ADOPTED, "", None, Candidate(compile_options=dict(OPTIONS)))


def x8():
    return jnp.arange(8, dtype=jnp.float32)


@dataclasses.dataclass
class Probe:
    """What a case saw besides its result: the traces of the user's function, xtat objects to check."""

    traces: int = 0
    jitted: list = dataclasses.field(default_factory=list)
    top_level: bool = True  # False: the calls were staged into an outer trace


def signatures(f: Any) -> int:
    """Input signatures compiled so far: jax.jit's cache entries, xtat.jit's resolved signatures."""
    return len(f.lookups()) if hasattr(f, "lookups") else f._cache_size()


def lowered_text(f: Any, *args: Any) -> str:
    return canonical_program(f.lower(*args).as_text())


def counted(probe: Probe, fn: Callable) -> Callable:
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        probe.traces += 1
        return fn(*args, **kwargs)
    return inner


# ------------------------------------------------------------------- cases
# Each case takes `jit` (jax.jit, or xtat.jit bound to a store) and a Probe.

def case_positional(jit, probe):
    f = jit(counted(probe, lambda x, y: x * y + 1))
    probe.jitted.append(f)
    return f(x8(), x8()), f(x8(), 2.0)


def case_kwargs_and_pytrees(jit, probe):
    def f(params, *, scale, extra=None):
        (a, b), c = params["pair"], params["c"]
        return {"out": (a @ b) * scale + c, "none": None, "extra": extra}
    f = jit(counted(probe, f))
    probe.jitted.append(f)
    params = {"pair": (jnp.ones((3, 4)), jnp.ones((4, 2))), "c": jnp.float32(1.0)}
    return f(params, scale=2.0), f(params, scale=3.0, extra=jnp.ones(2))


def _scaled(x, n):
    return x * n


def case_static_argnums_positional(jit, probe):
    f = jit(counted(probe, _scaled), static_argnums=1)
    probe.jitted.append(f)
    return f(x8(), 3), f(x8(), 4), f(x8(), 3), signatures(f)


def case_static_argnums_by_keyword(jit, probe):
    f = jit(counted(probe, _scaled), static_argnums=1)
    probe.jitted.append(f)
    return f(x8(), n=3), f(x8(), n=4), signatures(f)


def case_static_argnames_by_keyword(jit, probe):
    f = jit(counted(probe, _scaled), static_argnames="n")
    probe.jitted.append(f)
    return f(x8(), n=3), f(x=x8(), n=4), signatures(f)


def case_static_argnames_positionally(jit, probe):
    f = jit(counted(probe, _scaled), static_argnames="n")
    probe.jitted.append(f)
    return f(x8(), 3), f(x8(), 5), signatures(f)


def case_static_argnums_negative(jit, probe):
    f = jit(counted(probe, _scaled), static_argnums=-1)
    probe.jitted.append(f)
    return f(x8(), 3), f(x8(), 4), signatures(f)


def case_static_unhashable(jit, probe):
    f = jit(counted(probe, _scaled), static_argnums=1)
    return f(x8(), [1, 2])


def case_static_argnums_out_of_range(jit, probe):
    return jit(counted(probe, _scaled), static_argnums=5)(x8(), 2)


def case_donate_argnums(jit, probe):
    f = jit(counted(probe, lambda x, y: x + y), donate_argnums=0)
    probe.jitted.append(f)
    x = x8() + 0
    out = f(x, x8())
    return out, x.is_deleted()


def case_donate_argnames(jit, probe):
    f = jit(counted(probe, lambda x, y: x * y), donate_argnames="x")
    probe.jitted.append(f)
    x = x8() + 0
    out = f(x=x, y=x8())
    return out, x.is_deleted()


def case_in_and_out_shardings(jit, probe):
    mesh = jax.sharding.Mesh(jax.devices(), ("x",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    f = jit(counted(probe, lambda x: x * 2), in_shardings=sharding, out_shardings=sharding)
    probe.jitted.append(f)
    out = f(x8())
    return out, out.sharding == sharding, lowered_text(f, x8())


def case_keep_unused(jit, probe):
    f = jit(counted(probe, lambda x, unused: x + 1), keep_unused=True)
    probe.jitted.append(f)
    return f(x8(), jnp.ones(3)), lowered_text(f, x8(), jnp.ones(3))


def case_inline_under_outer_jit(jit, probe):
    g = jit(counted(probe, lambda x: jnp.sin(x) * 2), inline=True)
    outer = jax.jit(lambda x: g(x) + 1)
    probe.top_level = False
    return outer(x8()), str(jax.make_jaxpr(outer)(x8()))


def case_backend(jit, probe):
    f = jit(counted(probe, lambda x: x - 1), backend="cpu")
    probe.jitted.append(f)
    return f(x8()), lowered_text(f, x8())


def case_device(jit, probe):
    f = jit(counted(probe, lambda x: x - 1), device=jax.devices()[0])
    probe.jitted.append(f)
    return f(x8()), lowered_text(f, x8())


def case_decorator_bare(jit, probe):
    @jit
    def f(x):
        probe.traces += 1
        return x * 3
    probe.jitted.append(f)
    return f(x8())


def case_decorator_with_keywords(jit, probe):
    @jit(static_argnames="n")
    def f(x, n):
        probe.traces += 1
        return x ** n
    probe.jitted.append(f)
    return f(x8(), n=2)


def case_decorator_partial(jit, probe):
    @functools.partial(jit, static_argnums=(1,))
    def f(x, n):
        probe.traces += 1
        return x + n
    probe.jitted.append(f)
    return f(x8(), 7)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Scale:
    """A pytree module in the style of Equinox / flax.struct: the method is jitted with self as an argument."""

    w: jax.Array

    def apply(self, x):
        return self.w * x


def case_method_of_a_pytree(jit, probe):
    class Module(Scale):
        pass
    Module = jax.tree_util.register_dataclass(dataclasses.dataclass(Module))
    Module.apply = jit(counted(probe, Scale.apply))
    probe.jitted.append(Module.__dict__["apply"])
    m = Module(jnp.float32(3.0))
    return m.apply(x8()), Module.apply(m, x8())


def case_method_with_static_self(jit, probe):
    class Counter:
        def __init__(self, k):
            self.k = k

        def __hash__(self):
            return hash(self.k)

        def __eq__(self, other):
            return isinstance(other, Counter) and other.k == self.k

        @functools.partial(jit, static_argnums=0)
        def step(self, x):
            probe.traces += 1
            return x + self.k
    probe.jitted.append(Counter.__dict__["step"])
    return Counter(2).step(x8()), Counter(2).step(x8()), Counter(5).step(x8())


def case_functools_partial(jit, probe):
    def f(x, y, *, z):
        probe.traces += 1
        return x * y + z
    g = jit(functools.partial(f, z=jnp.float32(1.0)))
    h = jit(functools.partial(f, x8()))
    probe.jitted += [g, h]
    return g(x8(), x8()), h(x8(), z=2.0)


def case_lower_compile(jit, probe):
    f = jit(counted(probe, lambda x: jnp.tanh(x) @ jnp.ones((8, 8))))
    lowered = f.lower(x8())
    compiled = lowered.compile()
    return compiled(x8()), canonical_program(lowered.as_text())


def case_trace(jit, probe):
    f = jit(counted(probe, lambda x, n: x * n), static_argnums=1)
    traced = f.trace(x8(), 3)
    return str(traced.jaxpr), traced.lower().compile()(x8())


def case_eval_shape(jit, probe):
    f = jit(counted(probe, lambda x: {"a": x[:3], "b": x.sum()}))
    return f.eval_shape(x8())


def case_clear_cache(jit, probe):
    f = jit(counted(probe, lambda x: x + 2))
    probe.jitted.append(f)
    first = f(x8())
    f.clear_cache()
    return first, f(x8())


def case_under_grad(jit, probe):
    f = jit(counted(probe, lambda x: jnp.sin(x) * x))
    probe.top_level = False
    return jax.grad(lambda x: f(x).sum())(x8())


def case_under_vmap(jit, probe):
    f = jit(counted(probe, lambda x: jnp.cumsum(x) * 2))
    # jax batches the traced program and compiles the batched one with the same options, outside f's cache.
    probe.top_level = False
    return jax.vmap(f)(jnp.ones((3, 8)))


def case_under_scan(jit, probe):
    f = jit(counted(probe, lambda c: jnp.cos(c) + 1))
    probe.top_level = False
    return lax.scan(lambda c, _: (f(c), c.sum()), x8(), None, length=4)


def case_under_outer_jit(jit, probe):
    f = jit(counted(probe, lambda x: jnp.exp(x) / 3))
    probe.top_level = False
    return jax.jit(lambda x: f(x) * 2)(x8())


def case_jit_of_grad(jit, probe):
    f = jit(counted(probe, lambda x: jnp.sin(x) ** 2))
    probe.top_level = False
    return jax.jit(jax.grad(lambda x: f(x).sum()))(x8())


def case_user_raises(jit, probe):
    def f(x):
        probe.traces += 1
        raise ValueError("the user's function refuses this input")
    return jit(f)(x8())


def case_user_shape_error(jit, probe):
    return jit(counted(probe, lambda x, y: x @ y))(jnp.ones((2, 3)), jnp.ones((4, 5)))


def case_user_concretization_error(jit, probe):
    def f(x):
        probe.traces += 1
        return x if x.sum() > 0 else -x
    return jit(f)(x8())


def case_non_array_argument(jit, probe):
    return jit(counted(probe, lambda x, s: x))(x8(), "not an array")


def case_unknown_keyword_argument(jit, probe):
    return jit(counted(probe, lambda x: x))(x8(), y=1)


CASES = {name.removeprefix("case_"): fn for name, fn in dict(globals()).items() if name.startswith("case_")}


# ------------------------------------------------------------------- the matrix

def _normal(value: Any) -> Any:
    """Values as comparable data: arrays by dtype, shape and contents."""
    def leaf(x):
        if isinstance(x, (jax.Array, np.ndarray, np.generic)):
            return ("array", str(x.dtype), tuple(np.shape(x)), np.asarray(x).tobytes())
        if isinstance(x, jax.ShapeDtypeStruct):
            return ("spec", str(x.dtype), tuple(x.shape))
        return x
    leaves, tree = jax.tree.flatten(value, is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct))
    return str(tree), [leaf(x) for x in leaves]


def _outcome(case: Callable, jit: Callable) -> tuple[Any, Probe]:
    probe = Probe()
    # The warnings compared are the call's own: garbage that earlier tests left is collected first,
    # and not during the call, where its warnings would land on one side only.
    gc.collect()
    gc.disable()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result: Any = ("value", _normal(case(jit, probe)))
            except Exception as exc:
                result = ("raised", type(exc), re.sub(r"0x[0-9a-f]+", "0x", str(exc)))
    finally:
        gc.enable()
    messages = sorted(str(w.message) for w in caught
                      if not str(w.message).startswith("xtat.jit(") or "XLA defaults" not in str(w.message))
    return (result, messages, probe.traces), probe


@pytest.fixture(params=["defaults", "adopted", "adopted-python-frame"])
def mode(request, monkeypatch):
    if request.param.startswith("adopted"):
        monkeypatch.setattr(xtat_jit, "lookup", AdoptEverything())
    if request.param == "adopted-python-frame":
        monkeypatch.setattr(xtat_jit.nesting, "register", lambda owner, jitted: False)
    return request.param


@pytest.mark.parametrize("name", sorted(CASES))
def test_xtat_jit_behaves_as_jax_jit(name, mode, tmp_path):
    case = CASES[name]
    expected, _ = _outcome(case, jax.jit)
    got, probe = _outcome(case, functools.partial(xtat.jit, db=tmp_path / "empty.db"))
    assert got == expected
    if mode.startswith("adopted") and probe.top_level:
        for jitted in probe.jitted:
            served = [config for config, entry in jitted._entries.items()
                      if "xla_cpu_prefer_vector_width" in config and entry._cache_size() > 0]
            assert served, f"{name}: a top-level call did not run the tuned executable"


def test_lower_returns_the_tuned_lowering_and_executable(monkeypatch):
    monkeypatch.setattr(xtat_jit, "lookup", AdoptEverything())

    def f(x):
        return (jnp.tanh(x) @ jnp.ones((8, 64))).sum()  # a sum of 64: the tree-reduction rewriter's

    tuned = xtat.jit(f).lower(x8()).compile()
    assert executable_identity(tuned) == executable_identity(jax.jit(f).lower(x8()).compile(OPTIONS))
    assert executable_identity(tuned) != executable_identity(jax.jit(f).lower(x8()).compile())


def test_nested_use_applies_rewrites_and_no_warning(monkeypatch):
    """Under grad, scan and an outer jit, no warning: the rewrites apply and the outer program's options rule."""
    monkeypatch.setattr(xtat_jit, "lookup", AdoptEverything())
    f = xtat.jit(lambda x: jnp.sin(x) * x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.grad(lambda x: f(x).sum())(x8())
        lax.scan(lambda c, _: (f(c), None), x8(), None, length=2)
        jax.jit(lambda x: f(x) + 1)(x8())
        f(x8())
    # jax itself still refuses options on a nested jit of its own: only xtat's entries are let through.
    plain = jax.jit(lambda x: x + 1, compiler_options=OPTIONS)
    with pytest.raises(ValueError, match="top-level"):
        jax.jit(lambda x: plain(x))(x8())


def test_steady_state_calls_take_jax_dispatch_directly(monkeypatch):
    """After the first call the object's call slot is the tuned jax.jit itself, with no Python frame of ours."""
    monkeypatch.setattr(xtat_jit, "lookup", AdoptEverything())
    f = xtat.jit(lambda x: x * 2)
    f(x8())
    (entry,) = f._entries.values()
    assert type(f).__dict__["__call__"].__func__ is entry
    g = xtat.jit(lambda x: x * 3)  # every instance has its own slot
    assert type(g).__dict__["__call__"].__func__ != entry


def test_signatures_with_different_configs_are_routed(monkeypatch):
    """Two signatures, two configs: each runs its own executable, through the router."""
    def by_shape(identity, db):
        wide = any(a["shape"] == [16] for a in identity.avals)
        return Lookup(Found.ADOPTED, "", None, Candidate(compile_options=dict(OPTIONS))) if wide \
            else Lookup(Found.NO_RECORD)

    monkeypatch.setattr(xtat_jit, "lookup", by_shape)
    f = xtat.jit(lambda x: x * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small, wide = f(x8()), f(jnp.ones(16))
        f(x8()), f(jnp.ones(16))
    assert small.shape == (8,) and wide.shape == (16,)
    sizes = {("options" if "prefer_vector" in k else "defaults"): e._cache_size() for k, e in f._entries.items()}
    # The first wide call reached the defaults' jax.jit (then the only one) and compiled there, as
    # documented; every later wide call is routed to the options' jax.jit.
    assert sizes == {"options": 1, "defaults": 2}
    assert sorted(r.found.value for r in f.lookups()) == ["adopted", "no record"]
    assert type(f).__dict__["__call__"].__func__ == f._route_call
