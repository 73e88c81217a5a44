"""Presets: adopted configs as code or text that production uses without xtat.

Three formats (`xtat export --preset FORMAT`):

- `python`: a module with `COMPILER_OPTIONS` (workload name -> the
  `compiler_options` of `jax.jit`), `PROGRAM_REWRITES` (what compile options
  cannot express: apply those with `xtat.jit`), `ENVIRONMENT` (runtime
  decisions: `xtat run`, or `taskset` and `XLA_FLAGS` by hand), `LAYOUTS`
  (the sharding stage's: mesh, rules and each input's dimension names, which
  its `jit` helper places the inputs by) and `TUNED_UNDER`. It imports
  nothing but jax, and only when its `jit` helper is called.
- `json`: the same data as one JSON document.
- `xla-flags`: one `XLA_FLAGS` value. XLA_FLAGS is read once per process and
  applies to every compile in it, so this format is refused unless every
  exported workload has the same options.
"""

from __future__ import annotations

import json
import pprint
from dataclasses import dataclass
from enum import StrEnum

from xtat.apply.lookup import Unvetted, vetted
from xtat.core.candidate import HOST_DEVICES_FLAG, Candidate
from xtat.core.errors import UserError
from xtat.stages.sharding.layouts import Layout
from xtat.store.base import TuningStorage

# Set on ExecutableBuildOptions, not DebugOptions: compiler_options takes them, XLA_FLAGS does not.
_BUILD_OPTIONS = frozenset({"exec_time_optimization_effort", "memory_fitting_effort", "optimization_level",
                            "memory_fitting_level"})


class PresetFormat(StrEnum):
    PYTHON = "python"
    JSON = "json"
    XLA_FLAGS = "xla-flags"


@dataclass(frozen=True)
class PresetEntry:
    """One adopted workload, as production needs it."""

    name: str
    fingerprint: str
    compile_options: dict[str, object]
    program_rewrites: dict[str, object]
    environment: dict[str, object]
    layout: dict[str, object]  # the adopted layout: notation, mesh, rules, input dims (empty: none)
    tuned_under: dict[str, str]
    speedup: float | None = None
    speedup_ci: tuple[float | None, float | None] = (None, None)


def collect(store: TuningStorage, workload: str | None = None) -> list[PresetEntry]:
    """Every adopted workload in the store (or the one named), vetted; ambiguous names refused."""
    records = [store.find_workload(workload)] if workload else store.workloads()
    entries: dict[str, PresetEntry] = {}
    for record in records:
        result = store.latest_result(record.id)
        if result is None or not result.adopted:
            continue
        try:
            candidate = vetted(store, record, result)
        except Unvetted as refusal:
            raise UserError(f"workload {record.name!r} [{record.fingerprint[:12]}]: its adopted config is refused "
                            f"({refusal}); nothing was written") from None
        environment: dict[str, object] = dict(candidate.process.to_json())
        entry = PresetEntry(record.name, record.fingerprint, dict(candidate.compile_options), dict(candidate.program),
                            environment, _layout(candidate), dict(record.env), result.speedup,
                            (result.speedup_low, result.speedup_high))
        earlier = entries.get(record.name)
        if earlier is not None and _deployed(earlier) != _deployed(entry):
            raise UserError(f"workloads {earlier.fingerprint[:12]} and {entry.fingerprint[:12]} are both named "
                            f"{record.name!r} with different adopted configs; export one with --workload FINGERPRINT")
        entries.setdefault(record.name, entry)
    if not entries:
        raise UserError("no adopted config to export" + (f" for {workload!r}" if workload else "")
                        + ": `xtat show` lists the workloads and whether each was adopted")
    return list(entries.values())


def _layout(candidate: Candidate) -> dict[str, object]:
    """An adopted layout as a process without xtat applies it: the mesh's axes and sizes, the rules, and
    the dimension names of each flat dynamic input."""
    if not candidate.layout:
        return {}
    layout = Layout.parse(candidate.layout)
    return {"layout": layout.notation(), "mesh": [list(axis) for axis in layout.mesh], "rules": dict(layout.rules),
            "input_dims": [list(names) if names is not None else None for names in candidate.input_dims]}


def _deployed(entry: PresetEntry) -> tuple:
    return tuple(json.dumps(part, sort_keys=True) for part in
                 (entry.compile_options, entry.program_rewrites, entry.environment, entry.layout))


def render(entries: list[PresetEntry], fmt: PresetFormat, source: str) -> tuple[str, list[str]]:
    """The preset text and notes on what it cannot carry."""
    notes = [f"{e.name}: program rewrites {sorted(e.program_rewrites)} need xtat.jit; a preset cannot apply them"
             for e in entries if e.program_rewrites]
    notes += [f"{e.name}: the preset places the inputs by layout {e.layout['layout']!r}; intermediates marked "
              "with xtat.constrain are laid out only by xtat.jit" for e in entries if e.layout]
    if fmt is PresetFormat.XLA_FLAGS:
        return xla_flags(entries), notes + [
            f"{e.name}: tuned with {e.environment['cpu_count']} CPU(s); start the process with `xtat run` or taskset"
            for e in entries if "cpu_count" in e.environment]
    document = {
        "xtat_preset": 1,
        "source": source,
        "compiler_options": {e.name: e.compile_options for e in entries},
        "program_rewrites": {e.name: e.program_rewrites for e in entries if e.program_rewrites},
        "environment": {e.name: e.environment for e in entries if e.environment},
        "layouts": {e.name: e.layout for e in entries if e.layout},
        "tuned_under": {e.name: e.tuned_under for e in entries},
        "speedup": {e.name: {"median": e.speedup, "ci95": list(e.speedup_ci)} for e in entries},
    }
    if fmt is PresetFormat.JSON:
        return json.dumps(document, indent=1, sort_keys=True) + "\n", notes
    return _python_module(document), notes


def xla_flags(entries: list[PresetEntry]) -> str:
    """One XLA_FLAGS value for every exported workload, or a UserError saying why there is none."""
    distinct = {json.dumps({**e.compile_options, **e.environment}, sort_keys=True) for e in entries}
    if len(distinct) > 1:
        raise UserError(f"--preset xla-flags sets options for the whole process, but the {len(entries)} workloads "
                        f"exported have different options ({', '.join(e.name for e in entries)}); "
                        "export one with --workload NAME, or use --preset python or json")
    entry = entries[0]
    if entry.layout:
        raise UserError(f"{entry.name}'s adopted config places its inputs by layout {entry.layout['layout']!r}, "
                        "which no XLA flag expresses; use --preset python or json, or xtat.jit")
    if "autotune_results" in entry.environment:
        raise UserError(f"{entry.name}'s adopted config carries XLA's autotune results, a file XLA_FLAGS can only "
                        "name; use --preset python or json, which carry them, or `xtat run`")
    build = sorted(set(entry.compile_options) & _BUILD_OPTIONS)
    if build:
        raise UserError(f"{build} are build options, which XLA_FLAGS cannot set; use --preset python or json")
    flags = [f"--{name}={_flag_value(value)}" for name, value in sorted(entry.compile_options.items())]
    if "host_device_count" in entry.environment:
        flags.append(f"{HOST_DEVICES_FLAG}={entry.environment['host_device_count']}")
    return " ".join(flags) + "\n"


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_MODULE = '''"""XLA compile options tuned by xtat for these workloads; plain jax.jit applies them.

Written by `xtat export --preset python` from {source}. Use:

    import jax
    import this_module as preset
    step = jax.jit(train_step, compiler_options=preset.COMPILER_OPTIONS["{example}"])
    # or: step = preset.jit(train_step, "{example}")

PROGRAM_REWRITES are decisions a compile option cannot express; `xtat.jit`
applies them. ENVIRONMENT holds runtime decisions (CPU count, host device
count): start the process with `xtat run`, or with taskset and XLA_FLAGS; and,
on GPU, `autotune_results`, XLA's tile choices, which `jit` below hands to XLA
as a file (XLA loads one such file per process, at the first compile naming one).
LAYOUTS holds the sharding stage's layouts: a mesh of the process's first
devices, and the mesh axis of each named dimension; `jit` below places each
call's inputs on it (on CPU, start the process with
XLA_FLAGS=--xla_force_host_platform_device_count=N, as it was tuned).
TUNED_UNDER says where each config was measured: on other versions or
devices it may be slower, never wrong.
"""

COMPILER_OPTIONS = {compiler_options}

PROGRAM_REWRITES = {program_rewrites}

ENVIRONMENT = {environment}

LAYOUTS = {layouts}

TUNED_UNDER = {tuned_under}

SPEEDUP = {speedup}


def jit(fn, name=None, **jit_kwargs):
    """jax.jit(fn, compiler_options=COMPILER_OPTIONS[name or fn.__name__], **jit_kwargs)."""
    import jax

    name = name or fn.__name__
    options = dict(COMPILER_OPTIONS[name])
    results = ENVIRONMENT.get(name, {{}}).get("autotune_results")
    if results:
        import hashlib
        import os
        import tempfile

        path = os.path.join(tempfile.gettempdir(), "xtat-autotune-%s.textproto"
                            % hashlib.sha256(results.encode()).hexdigest()[:16])
        with open(path + ".partial", "w") as handle:
            handle.write(results)
        os.replace(path + ".partial", path)
        options["xla_gpu_load_autotune_results_from"] = path
    jitted = jax.jit(fn, compiler_options=options, **jit_kwargs)
    layout = LAYOUTS.get(name)
    return _placing(jitted, layout, jit_kwargs) if layout else jitted


def _placing(jitted, layout, jit_kwargs):
    """jitted, with each call's dynamic inputs placed on the layout's mesh first."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    axes, sizes = [axis for axis, _ in layout["mesh"]], [size for _, size in layout["mesh"]]
    mesh = Mesh(np.array(jax.devices()[:int(np.prod(sizes))]).reshape(sizes), tuple(axes))
    shardings = [NamedSharding(mesh, PartitionSpec(*[layout["rules"].get(n) for n in names] if names else ()))
                 for names in layout["input_dims"]]
    static = jit_kwargs.get("static_argnums", ())
    static = {{static}} if isinstance(static, int) else set(static)
    static_names = jit_kwargs.get("static_argnames", ())
    static_names = {{static_names}} if isinstance(static_names, str) else set(static_names)

    def call(*args, **kwargs):
        positions = {{i % len(args) for i in static if -len(args) <= i < len(args)}}
        dynamic = [i for i in range(len(args)) if i not in positions]
        names = [k for k in kwargs if k not in static_names]
        leaves, tree = jax.tree.flatten(([args[i] for i in dynamic], {{k: kwargs[k] for k in names}}))
        if len(leaves) != len(shardings) or any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return jitted(*args, **kwargs)  # inside another trace: the outer computation places its values
        placed_args, placed_kwargs = jax.tree.unflatten(
            tree, [jax.device_put(leaf, sharding) for leaf, sharding in zip(leaves, shardings)])
        full = list(args)
        for i, value in zip(dynamic, placed_args):
            full[i] = value
        return jitted(*full, **{{**kwargs, **placed_kwargs}})

    for attribute in ("lower", "trace", "eval_shape", "clear_cache"):
        setattr(call, attribute, getattr(jitted, attribute))
    return call
'''


def _python_module(document: dict) -> str:
    def literal(value: object) -> str:
        return pprint.pformat(value, indent=1, width=100, sort_dicts=True)

    return _MODULE.format(
        source=document["source"], example=next(iter(document["compiler_options"])),
        **{key: literal(document[key]) for key in
           ("compiler_options", "program_rewrites", "environment", "layouts", "tuned_under", "speedup")})
