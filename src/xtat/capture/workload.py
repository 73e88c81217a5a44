"""The unit of tuning: a JAX function with example inputs, and its capture.

`Workload` is what a user writes. `capture()` stages it the way `jax.jit`
does (trace, lower) and returns a `Capture`: the fingerprint that keys every
stored record, and a serialized `jax.export` artifact plus flat numpy inputs
that worker processes can compile without importing the user's code.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jaxlib
import numpy as np

from xtat.capture.arguments import (
    JIT_ARGUMENT_OPTIONS,
    InputLeaf,
    Statics,
    export_flat,
    filtered_call,
    input_leaves,
    partition,
    unwrap_jit,
)
from xtat.capture.dimnames import Mark, MarkLayout, leaf_dims, marks_of, placed
from xtat.capture.source import Source
from xtat.core.errors import UserError


@dataclass(frozen=True)
class Workload:
    """A function to tune with example arguments, called as `fn(*args, **kwargs)`.

    Static arguments are named as `jax.jit` names them (`static_argnums`,
    `static_argnames`); donated ones too, since donation is part of the
    program that `xtat.jit` looks up. A function already wrapped by `jax.jit`
    is unwrapped, and the options it was wrapped with are taken unless given;
    one wrapped by `equinox.filter_jit` is split as it splits calls (arrays
    traced, every other leaf static).
    make_inputs(seed) returns a fresh argument tuple shaped like `args`; the
    adopted config is verified again on make_inputs(1).
    """

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict | None = None
    name: str | None = None
    make_inputs: Callable[[int], tuple] | None = None
    static_argnums: int | tuple[int, ...] | None = None
    static_argnames: str | tuple[str, ...] | None = None
    donate_argnums: int | tuple[int, ...] | None = None
    donate_argnames: str | tuple[str, ...] | None = None
    # Where a worker can import this workload from (`module:attr`, `/path/file.py:attr`), for a
    # program jax.export cannot carry (host callbacks); `load_target` records it.
    source: str | None = None
    # Named dimensions of the arguments (`xtat.dims`): a tuple beside `args`, each entry a prefix of
    # its argument's pytree holding `xtat.dims(...)` per named array or None; read by the sharding stage.
    dims: tuple | None = None
    # The program this workload stands for when it is a copy of one compiled elsewhere (a profiled
    # script's, `xtat profile`): its records are keyed as that program, so `xtat run` finds them.
    keyed_as: Identity | None = None

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise UserError(f"Workload.fn must be callable, got {type(self.fn).__name__}")
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))
        unwrapped = unwrap_jit(self.fn)
        object.__setattr__(self, "fn", unwrapped.fn)
        for option, value in unwrapped.options.items():
            if getattr(self, option) is None:
                object.__setattr__(self, option, value)
        if unwrapped.filtered:  # equinox.filter_jit: arrays traced, every other leaf static
            kwargs, make_inputs = self.kwargs or {}, self.make_inputs
            object.__setattr__(self, "fn", filtered_call(unwrapped.fn))
            object.__setattr__(self, "args", partition(self.args, kwargs))
            object.__setattr__(self, "kwargs", None)
            object.__setattr__(self, "static_argnums", (1,))
            if make_inputs is not None:
                object.__setattr__(self, "make_inputs", lambda seed: partition(tuple(make_inputs(seed)), kwargs))

    @property
    def display_name(self) -> str:
        return self.name or str(getattr(self.fn, "__name__", "workload"))

    @property
    def jit_options(self) -> dict[str, Any]:
        """The argument options of `jax.jit(fn, ...)` that this workload is lowered with."""
        return {option: getattr(self, option) for option in JIT_ARGUMENT_OPTIONS
                if getattr(self, option) is not None}

    @property
    def statics(self) -> Statics:
        return Statics.of(self.fn, self.static_argnums, self.static_argnames)

    def bound(self, args: tuple | None = None) -> tuple[Callable, tuple, dict]:
        """fn over its dynamic arguments alone (static values closed over), with those arguments."""
        return self.statics.bind(self.fn, self.args if args is None else args, self.kwargs or {})


DEVICES = "devices"  # the environment identity's device count


def environment_identity() -> dict[str, str]:
    """What besides the program decides whether a stored config applies.

    The machine by name: on CPU the device kind is just "cpu", so the CPU's
    vendor, model and instruction-set extensions are added (a config tuned
    with AVX-512 code generation must not apply on an ARM host); on GPU the
    compute capability and the CUDA runtime, driver and cuDNN versions. Also the platform version and
    the XLA flags in force, less the host device count and the autotune results file, which are
    decisions of their own (the runtime and tiles stages'). And the device count (`DEVICES`: a
    program tuned over 4 host devices, or timed beside 7 other GPUs, is not measured for one): as
    the process had it before xtat's runtime setup, if one changed it, so that `xtat run`'s program
    finds the record its setup was adopted in.
    """
    from xtat.core.candidate import AUTOTUNE_FLAG, HOST_DEVICES_FLAG, devices_changed

    device = jax.devices()[0]
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith((HOST_DEVICES_FLAG + "=", AUTOTUNE_FLAG + "="))]
    devices = str(jax.local_device_count())
    before, after = devices_changed(os.environ)
    if device.platform == "cpu" and after == devices and before.isdigit():
        devices = before  # not when the program set its own count after xtat's setup: then `after` differs
    env = {
        "platform": device.platform,
        "device_kind": device.device_kind,
        DEVICES: devices,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "platform_version": str(getattr(device.client, "platform_version", "")),
        "xla_flags": " ".join(flags),
        "libtpu_init_args": os.environ.get("LIBTPU_INIT_ARGS", ""),
    }
    if device.platform == "cpu":
        env.update(_cpu_identity())
    capability = getattr(device, "compute_capability", None)
    if capability is not None:
        env["compute_capability"] = str(capability)
    if device.platform in ("gpu", "cuda"):
        env.update(_cuda_identity(_cuda_versions()))
    return env


def environment_differences(recorded: dict[str, str], here: dict[str, str]) -> str:
    """Why a record keyed under the environment `recorded` does not hold `here`: each key that differs,
    "" when none does."""
    said = []
    for key in sorted(set(recorded) | set(here)):
        if recorded.get(key) == here.get(key):
            continue
        if key not in recorded:
            said.append(f"{key}: not recorded (tuned before xtat keyed it; tune again here), here {_short(here[key])}")
        else:
            said.append(f"{key}: tuned with {_short(recorded[key])}, here {_short(here.get(key, 'none'))}")
    return "; ".join(said)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 48 else text[:44] + "...'"


def _cuda_versions() -> Any:
    """jaxlib's CUDA version queries (a module), or None without the CUDA plugin."""
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        return None
    return cuda_versions


def _cuda_identity(versions: Any) -> dict[str, str]:
    """CUDA runtime, driver and cuDNN versions, as jax's own compilation cache keys them.
    Not yet run on GPU hardware from this project (tests use a stand-in module)."""
    out = {}
    for key, query in (("cuda_runtime", "cuda_runtime_get_version"), ("cuda_driver", "cuda_driver_get_version"),
                       ("cudnn", "cudnn_get_version")):
        try:
            out[key] = str(getattr(versions, query)())
        except Exception:  # no plugin, or a query this jaxlib lacks: recorded as unknown
            out[key] = "unknown"
    return out


_ISA_PREFIXES = ("sse", "avx", "fma", "f16c", "amx", "bmi", "asimd", "sve", "neon")


@functools.cache
def _cpu_identity() -> dict[str, str]:
    """Vendor, model and the instruction-set extensions that code generation may use."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                name = name.strip()
                if name in ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part"):
                    fields.setdefault(name, value.strip())
    except OSError:
        pass
    extensions = (fields.get("flags") or fields.get("Features") or "").split()
    return {
        "cpu_vendor": fields.get("vendor_id") or fields.get("CPU implementer") or platform.machine(),
        "cpu_model": fields.get("model name") or fields.get("CPU part") or platform.processor(),
        "cpu_isa": " ".join(sorted(e for e in extensions if e.startswith(_ISA_PREFIXES))),
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_FUNCTION = re.compile(r"func\.func (?:public |private )?@([\w.$-]+)\(")
_MODULE_NAME = re.compile(r"^module @[\w.$-]+", re.MULTILINE)
# Debug names: where the program was traced from and what its pytree paths are called.
_DEBUG_NAMES = re.compile(r'(?:, )?jax\.(?:result|arg)_info = "(?:[^"\\]|\\.)*"| loc\((?:[^()]|\([^()]*\))*\)|^#loc.*$',
                          re.MULTILINE)


def canonical_program(stablehlo: str) -> str:
    """The StableHLO text without the names a rename or a `functools.partial` changes.

    The module is named after the jitted function and nested functions after
    theirs; arguments and results carry their pytree paths; locations name
    files and lines. None of that is what the program computes, so none of it
    may turn a tuned program into "no record". Custom-call targets and
    everything else stay.
    """
    text = _MODULE_NAME.sub("module @jit", _DEBUG_NAMES.sub("", stablehlo))
    text = re.sub(r" \{\}(?=[,)])", "", text)  # attribute dictionaries left empty
    names = [n for n in dict.fromkeys(_FUNCTION.findall(text)) if n != "main"]
    if names:
        canonical = {name: f"fn{i}" for i, name in enumerate(names)}
        pattern = re.compile(r"@(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w.$-])")
        text = pattern.sub(lambda m: "@" + canonical[m.group(1)], text)
    return text


def program_key(stablehlo: str, avals: list[dict]) -> str:
    """Version-independent identity of a lowered program; function names and locations do not count."""
    return _sha(json.dumps({"key": 2, "stablehlo": _sha(canonical_program(stablehlo)), "avals": avals},
                           sort_keys=True))


def fingerprint(program: str, env: dict[str, str]) -> str:
    """The workload key of the design brief: program plus platform and versions."""
    return _sha(json.dumps({"program": program, **env}, sort_keys=True))


def describe_avals(lowered: jax.stages.Lowered) -> list[dict]:
    infos = jax.tree.leaves(lowered.args_info)
    return [
        {
            "shape": list(info.shape),
            "dtype": str(info.dtype),
            "weak_type": bool(getattr(info._aval, "weak_type", False)),
            "donated": bool(info.donated),
        }
        for info in infos
    ]


@dataclass(frozen=True)
class Identity:
    """Keys of one lowered program in this environment."""

    program: str
    fingerprint: str
    env: dict[str, str]
    avals: list[dict]

    @classmethod
    def of(cls, lowered: jax.stages.Lowered) -> Identity:
        avals = describe_avals(lowered)
        env = environment_identity()
        program = program_key(lowered.as_text(), avals)
        return cls(program=program, fingerprint=fingerprint(program, env), env=env, avals=avals)


@dataclass(frozen=True)
class Capture:
    """A workload staged for tuning: keys, portable program, flat inputs."""

    workload: Workload
    identity: Identity
    exported: bytes  # jax.export serialization of the traced program, or its `Source` (host callbacks)
    inputs: list[np.ndarray]  # flat leaves of (args, kwargs)
    leaves: list[InputLeaf]  # what each input is (a typed key travels as its data)
    verify_inputs: list[np.ndarray] | None  # flat leaves of make_inputs(1)
    cost: dict[str, float] = field(default_factory=dict)
    # Each input's dimension names (`Workload.dims`; without them `batch` on the last argument's
    # leading axes, "" naming an axis nothing maps), or None.
    dims: list[tuple[str, ...] | None] = field(default_factory=list)
    # The intermediates the workload marks (`xtat.constrain`): names and shape of each, in trace order.
    marks: list[Mark] = field(default_factory=list)

    @property
    def dims_declared(self) -> bool:
        return self.workload.dims is not None

    @property
    def name(self) -> str:
        return self.workload.display_name

    @property
    def fingerprint(self) -> str:
        return self.identity.fingerprint


def capture(workload: Workload) -> Capture:
    """Trace and lower the workload once; everything the tuner keys on comes from here.

    It is lowered as `jax.jit(fn, static_argnums=..., ...)` lowers it, which is
    what `xtat.jit` fingerprints; workers get the dynamic leaves alone."""
    kwargs = workload.kwargs or {}
    fn, dynamic_args, dynamic_kwargs = workload.bound()
    leaves, inputs = input_leaves(dynamic_args, dynamic_kwargs, "args")  # before jax's own, vaguer refusal
    try:
        lowered = jax.jit(workload.fn, **workload.jit_options).lower(*workload.args, **kwargs)
    except Exception as exc:
        raise UserError(
            f"workload {workload.display_name!r} fails to trace under jax.jit: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    identity = workload.keyed_as or Identity.of(lowered)
    try:
        with placed(MarkLayout()) as recording:  # the export's trace records the marks it meets
            exported = export_flat(fn, dynamic_args, dynamic_kwargs, leaves)
        marks = recording.seen
    except UserError:
        raise  # a mark that does not fit its array
    except Exception as exc:
        # Host callbacks and effects do not export: workers import the target and trace it themselves.
        if workload.source is None:
            raise UserError(
                f"workload {workload.display_name!r} cannot be exported for isolated measurement "
                f"({type(exc).__name__}: {str(exc)[:300]}). A program with host callbacks is traced in the "
                "workers from its source: define a zero-argument function that returns the Workload in a "
                "module or file (not a notebook cell) and tune the TARGET 'module:function' or "
                "'file.py:function', or pass Workload(source='module:function')"
            ) from exc
        exported = Source(workload.source, identity.program, {}, tuple(sys.path)).to_bytes()
        marks = marks_of(fn, *dynamic_args, **dynamic_kwargs)
    verify_inputs = None
    if workload.make_inputs is not None:
        fresh = workload.make_inputs(1)
        fresh = fresh if isinstance(fresh, tuple) else (fresh,)
        static, _ = workload.statics.split(workload.args, kwargs)
        fresh_static, (fresh_args, _) = workload.statics.split(fresh, kwargs)
        if not _same_statics(static, fresh_static):
            raise UserError("make_inputs(1) must return the same static arguments as `args`")
        fresh_leaves, verify_inputs = input_leaves(fresh_args, dynamic_kwargs, "make_inputs(1)")
        if [(leaf.shape, leaf.dtype) for leaf in fresh_leaves] != [(leaf.shape, leaf.dtype) for leaf in leaves]:
            raise UserError(
                "make_inputs(1) must return arguments with the same shapes and dtypes as `args`"
            )
    cost: dict[str, float] = {}
    try:
        analysis = lowered.cost_analysis() or {}
        cost = {k: float(v) for k, v in analysis.items() if k in ("flops", "bytes accessed", "transcendentals")}
        # The analysis counts a while loop's body once: say how many there are, so nobody reads it as a rate.
        cost["while_loops"] = float(lowered.as_text().count("stablehlo.while"))
    except Exception:  # cost analysis is informative only
        cost = {}
    return Capture(
        workload=workload,
        identity=identity,
        exported=exported,
        inputs=inputs,
        leaves=leaves,
        verify_inputs=verify_inputs,
        cost=cost,
        dims=input_dims(workload, len(inputs)),
        marks=marks,
    )


def input_dims(workload: Workload, count: int) -> list[tuple[str, ...] | None]:
    """The declared names of each of the `count` flat inputs (dynamic args, then kwargs). Without a
    declaration: `batch` for the leading axis of each array of the last positional argument ("" names
    an axis nothing maps), so the sharding stage can still offer data-parallel layouts."""
    if workload.dims is None:
        _, (dynamic_args, _) = workload.statics.split(workload.args, workload.kwargs or {})
        if not dynamic_args:
            return [None] * count
        before = len(jax.tree.leaves(dynamic_args[:-1]))
        last = [tuple(getattr(leaf, "shape", ())) for leaf in jax.tree.leaves(dynamic_args[-1])]
        batch = [("batch",) + ("",) * (len(shape) - 1) if shape else None for shape in last]
        return ([None] * before + batch + [None] * count)[:count]
    if not isinstance(workload.dims, tuple) or len(workload.dims) != len(workload.args):
        raise UserError(f"Workload dims must be a tuple with one entry per argument ({len(workload.args)}), "
                        f"got {type(workload.dims).__name__}")
    _, (dynamic_dims, _) = workload.statics.split(workload.dims, {})
    _, (dynamic_args, _) = workload.statics.split(workload.args, workload.kwargs or {})
    named = leaf_dims(dynamic_dims, dynamic_args)
    return (named + [None] * count)[:count]  # keyword arguments are not named


def _same_statics(a: tuple, b: tuple) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a static value whose == is not a bool: unequal unless identical
        return all(x is y for x, y in zip(a, b)) and len(a) == len(b)
