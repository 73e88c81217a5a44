"""Inside a script run by `xtat profile`: every program jax compiles, its calls, and their time.

`boot/sitecustomize.py` calls `install` once the script has imported jax. Two steps of jax's are
wrapped (private API, guarded: without them nothing is recorded and the profile says why):

- the compile step (`MeshComputation.compile`): each program's `Identity`, the key `xtat run`
  applies configs by, and its compile time;
- the Python call of a jitted program (`pjit._pjit_call_impl_python`), with jax's C++ fast path
  turned off so that every call passes there: the call is timed until its outputs are ready, the
  compiles inside it left out. A profiled script so runs with synchronous dispatch and a little
  Python per call; the shares are of that run.

A program's first call keeps its traced program (to export, if it turns out hot) and a copy of its
inputs (when they are arrays of numbers of at most `INPUT_LIMIT_BYTES` together; otherwise each
input's range of finite values, from which the tuner seeds inputs of the same avals, and the
profile says so). It also keeps the Python function the program was traced from (its name and
where it is defined, from jax's debug info): the signatures of one function (a smaller last
batch, several sequence lengths) are one `function` and are hot together.

At exit the recorder writes its folder: `programs.json` (`ProgramsFile`), and for each program of
a hot function (its signatures together take `hot` of the process's time or more; at most
`SIGNATURES_KEPT` of them, the largest) `N.export` (jax.export) and `N.npz` (its inputs).
`programs.json` is written last, by rename: a folder without it is an incomplete profile.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xtat.apply.intercept import identity_of
from xtat.profile.records import ProgramSeen, ProgramsFile

INPUT_LIMIT_BYTES = 64 << 20
SIGNATURES_KEPT = 8  # a hot function's signatures kept for tuning, the largest shares first


class _Program:
    """What the recorder knows of one program while the script runs."""

    def __init__(self, index: int, fingerprint: str, program: str, avals: list[dict], name: str):
        self.index, self.fingerprint, self.program, self.avals, self.name = index, fingerprint, program, avals, name
        self.calls = 0
        self.run_s = 0.0
        self.compile_s = 0.0
        self.jaxpr: Any = None
        self.function = ""  # the traced Python function, `function_of`
        self.donated: tuple[bool, ...] = ()
        self.inputs: list | None = None
        self.ranges: list[tuple[float, float] | None] | None = None  # per input, when `inputs` are not kept
        self.inputs_note = ""


class Recorder:
    def __init__(self, folder: Path, hot: float, started: float, keep_bytes: int = INPUT_LIMIT_BYTES):
        self.folder, self.hot, self.keep_bytes = folder, hot, keep_bytes
        self.started = started
        self.programs: dict[str, _Program] = {}
        self.by_executable: weakref.WeakKeyDictionary[Any, _Program] = weakref.WeakKeyDictionary()
        self.compiling = threading.local()  # seconds spent compiling in this thread, and the last identity
        self.lock = threading.Lock()
        self.notes: list[str] = []

    def compile_clock(self) -> float:
        return getattr(self.compiling, "seconds", 0.0)

    def compiled(self, computation: Any, executable: Any, seconds: float) -> None:
        self.compiling.seconds = self.compile_clock() + seconds
        try:
            identity = identity_of(computation)
        except Exception as exc:  # a jax whose private lowering reads differently
            self._note(f"a program could not be fingerprinted ({type(exc).__name__}: {exc})")
            return
        with self.lock:
            program = self.programs.get(identity.fingerprint)
            if program is None:
                program = self.programs[identity.fingerprint] = _Program(
                    len(self.programs), identity.fingerprint, identity.program, identity.avals,
                    str(getattr(computation, "_name", "") or "program"))
            program.compile_s += seconds
        self.by_executable[executable] = program

    def called(self, executable: Any, seconds: float, jaxpr: Any, donated: tuple[bool, ...],
               inputs: Callable[[], Inputs]) -> None:
        program = self.by_executable.get(executable) if executable is not None else None
        if program is None:
            return  # a call jax ran without a compiled executable of ours (under a trace): not a program call
        with self.lock:
            program.calls += 1
            program.run_s += seconds
            if program.jaxpr is None:
                program.jaxpr, program.donated = jaxpr, donated
                program.function = function_of(jaxpr)
                program.inputs, program.ranges, program.inputs_note = inputs()

    def _note(self, text: str) -> None:
        with self.lock:
            if text not in self.notes:
                self.notes.append(text)

    def write(self) -> None:
        """The folder's files; `programs.json` last (by rename), so a reader sees all or nothing."""
        import jax.numpy as jnp  # noqa: F401  (jax is loaded: the recorder was installed after it)
        import numpy as np

        wall = time.perf_counter() - self.started
        seen = []
        kept = self._kept(wall)
        for program in sorted(self.programs.values(), key=lambda p: -p.run_s):
            hot = program.fingerprint in kept
            exported, why = "", ""
            if hot:
                try:
                    data = _export(program.jaxpr, program.donated)
                    exported = f"{program.index}.export"
                    (self.folder / exported).write_bytes(data)
                except Exception as exc:  # host callbacks and effects do not export
                    why = f"cannot be exported for tuning: {type(exc).__name__}: {str(exc)[:300]}"
                    exported = ""
            inputs_file = ""
            if exported and program.inputs is not None:
                inputs_file = f"{program.index}.npz"
                np.savez(self.folder / inputs_file, *program.inputs)
            seen.append(ProgramSeen(
                fingerprint=program.fingerprint, program=program.program, name=program.name, avals=program.avals,
                calls=program.calls, run_s=program.run_s, compile_s=program.compile_s, exported=exported,
                inputs=inputs_file, inputs_note=program.inputs_note if exported else "", not_tunable=why,
                function=program.function, ranges=program.ranges if exported and not inputs_file else None))
        record = ProgramsFile(wall_s=wall, programs=seen, notes=list(self.notes))
        partial = self.folder / "programs.json.part"
        partial.write_text(record.model_dump_json())
        os.replace(partial, self.folder / "programs.json")

    def _kept(self, wall: float) -> set[str]:
        """The fingerprints to export: the largest `SIGNATURES_KEPT` called programs of each function
        whose programs together take `hot` of the time (a program with no function is its own)."""
        functions: dict[str, list[_Program]] = {}
        for program in self.programs.values():
            if program.jaxpr is not None:
                functions.setdefault(program.function or program.fingerprint, []).append(program)
        kept: set[str] = set()
        for members in functions.values():
            if wall > 0 and sum(p.run_s for p in members) / wall >= self.hot:
                members.sort(key=lambda p: -p.run_s)
                kept.update(p.fingerprint for p in members[:SIGNATURES_KEPT])
        return kept


def function_of(jaxpr: Any) -> str:
    """The Python function a program was traced from, `name at file:line` as jax's debug info has it
    (private: "" when this jax keeps none, and the program is then a function of its own)."""
    info = getattr(getattr(jaxpr, "jaxpr", None), "debug_info", None)
    where = getattr(info, "func_src_info", None)
    return where if isinstance(where, str) and " at " in where else ""


def _export(jaxpr: Any, donated: tuple[bool, ...]) -> bytes:
    """The jax.export serialization of a traced program, called with its flat inputs."""
    import jax
    from jax.extend import core as jex_core

    function = jex_core.jaxpr_as_fun(jaxpr)
    specs = [jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=getattr(aval, "weak_type", False))
             for aval in jaxpr.in_avals]
    donate = tuple(i for i, flag in enumerate(donated) if flag)
    return bytes(jax.export.export(jax.jit(function, donate_argnums=donate))(*specs).serialize())


Inputs = tuple[list | None, list[tuple[float, float] | None] | None, str]  # copies, or ranges, and why


def _input_copies(args: tuple, limit: int) -> Inputs:
    """Host copies of a call's inputs (before the call: donated ones are gone after it), or each
    input's range of finite values (None for one that is not an array of numbers) and why."""
    import jax
    import numpy as np

    def numeric(arg: Any) -> bool:
        dtype = getattr(arg, "dtype", None)
        return dtype is not None and not jax.dtypes.issubdtype(dtype, jax.dtypes.extended)

    total = sum(int(getattr(a, "nbytes", 0)) for a in args)
    if total <= limit and all(numeric(arg) for arg in args):
        return [np.array(arg) for arg in args], None, ""
    why = (f"inputs of {total / 2**20:.1f} MiB, over the {limit / 2**20:.1f} MiB kept"
           if total > limit else "an input is not an array of numbers (a typed key or token)")
    return None, [_finite_range(np.asarray(arg)) if numeric(arg) else None for arg in args], \
        f"{why}: seeded inputs in each input's range"


def _finite_range(values: Any) -> tuple[float, float] | None:
    import numpy as np

    if np.issubdtype(values.dtype, np.complexfloating):
        return None
    finite = values[np.isfinite(values)] if np.issubdtype(values.dtype, np.inexact) else values
    return (float(finite.min()), float(finite.max())) if finite.size else None


def install(folder: str | Path, hot: float, started: float | None = None,
            keep_bytes: int | None = None) -> Recorder | None:
    """Record this process's programs into `folder`, a call's inputs kept up to `keep_bytes`
    (default `INPUT_LIMIT_BYTES`); None (and the reason in the folder) when this jax lacks the steps
    the recorder wraps."""
    folder = Path(folder)
    try:
        from jax._src import pjit
        from jax._src.interpreters import pxla

        compile_step: Callable = pxla.MeshComputation.compile
        call_step: Callable = pjit._pjit_call_impl_python
        pjit._get_fastpath_data  # noqa: B018  (present, to be replaced)
    except (ImportError, AttributeError) as exc:
        (folder / "unsupported.txt").write_text(f"this jax has no step the profiler can wrap: {exc}\n")
        return None
    recorder = Recorder(folder, hot, time.perf_counter() if started is None else started,
                        INPUT_LIMIT_BYTES if keep_bytes is None else keep_bytes)

    def compile(self: Any, compiler_options: Any = None, *, device_assignment: Any = None) -> Any:
        cached = getattr(self, "_executable", None) if compiler_options is None and device_assignment is None else None
        if cached is not None:
            return cached
        started = time.perf_counter()
        executable = compile_step(self, compiler_options, device_assignment=device_assignment)
        recorder.compiled(self, executable, time.perf_counter() - started)
        return executable

    def call(*args: Any, **params: Any) -> Any:
        import jax

        started, compiling = time.perf_counter(), recorder.compile_clock()
        copies: list = []
        program_known = params.get("jaxpr") is not None and any(
            p.jaxpr is params["jaxpr"] for p in recorder.programs.values())
        if not program_known:  # perhaps a first call: copy its inputs now, donation may consume them
            copies.append(_input_copies(args, recorder.keep_bytes))
        result = call_step(*args, **params)
        jax.block_until_ready(result[0])
        seconds = time.perf_counter() - started - (recorder.compile_clock() - compiling)
        recorder.called(result[1], max(seconds, 0.0), params.get("jaxpr"),
                        tuple(params.get("donated_invars", ())),
                        (lambda: copies[0]) if copies else (lambda: (None, None, "inputs not kept")))
        return result

    pxla.MeshComputation.compile = compile  # type: ignore[method-assign]  # jax's own class, wrapped
    pjit._pjit_call_impl_python = call
    pjit._get_fastpath_data = lambda *args, **kwargs: None  # every call through `call`
    atexit.register(recorder.write)
    return recorder
