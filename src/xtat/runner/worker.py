"""Worker process: compiles, verifies and times candidates on request.

Started by `runner.pool` as `python -m xtat.runner.worker` in its own process
group, with the environment its runtime decisions call for. It speaks the
records of `runner.protocol` as JSON lines: requests on stdin, one reply per
request on a private copy of stdout (fd 1 itself is pointed at stderr so that
stray prints from XLA or user code cannot corrupt the protocol). Anything that kills the process is the
parent's to classify.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from xtat.core.status import TrialStatus
from xtat.runner import protocol as p
from xtat.runner.base import DEFAULT_ID
from xtat.runner.verify import Tolerance

INPUT_SETS = tuple(p.InputSet)
BUDGET_FILE = "budget.json"
DIMS_FILE = "dims.json"  # each input's declared dimension names, for layouts
COMPILE_CACHE_SIZE = 4


def _is_oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in text or "Out of memory" in text


def _failed(exc: BaseException, otherwise: TrialStatus) -> p.Failed:
    return p.Failed(TrialStatus.OOM if _is_oom(exc) else otherwise, _error_text(exc))


class Worker:
    def __init__(self) -> None:
        self.programs: dict[str, object] = {}  # exported programs by file name
        self.folder: Path | None = None
        self.inputs: dict[p.InputSet, tuple[tuple, dict]] = {}
        self.reference: dict[p.InputSet, list[np.ndarray]] = {}
        self.pristine: dict[p.InputSet, list[np.ndarray]] = {}  # host copies of the inputs, to detect writes into them
        self.budget: dict[str, Any] = {}  # verify.Budget as JSON: what a chaotic output may move (calibrated once)
        self.built: dict[str, Any] = {}  # builder.Built, or a _Deployed
        # Compile cache: recent builds by (program, options), kept after `release`, so a
        # config compiled before in this worker (the default after its reference run, a
        # config asked again) is not compiled again. Bounded: executables hold memory.
        self.cache: OrderedDict[str, tuple[Any, dict]] = OrderedDict()
        self.slowdown_s: dict[str, float] = {}
        self.lazy: dict[str, object] = {}  # test-only fault: builds that return stale outputs
        self.leaf_names: list[tuple[str, ...] | None] = []  # each input's dimension names (DIMS_FILE)
        self.layouts: dict[str, str] = {}  # build id -> its layout ("" for jax's own placement)
        self.placed: dict[tuple[str, str], tuple[tuple, dict]] = {}  # (layout, input set) -> inputs on its mesh
        self.shardings: dict[str, tuple] = {}  # layout -> each input's sharding on its mesh
        self.checks: dict[str, int] = {}  # output checks per build (for the test-only flaky fault)

    # -- requests -----------------------------------------------------------

    def load(self, request: p.LoadRun) -> p.Loaded:
        import jax

        self.folder = Path(request.folder)
        for name in INPUT_SETS:
            path = self.folder / f"inputs_{name}.npz"
            if path.exists():
                with np.load(path, allow_pickle=False) as data:
                    self.pristine[name] = [data[f"arr_{i}"] for i in range(len(data.files))]
                # Copies on the device: on CPU device_put may share the numpy array's memory.
                leaves = [jax.device_put(np.array(x, copy=True)) for x in self.pristine[name]]
                self.inputs[name] = (tuple(leaves), {})  # the exported program takes flat leaves
            ref = self.folder / f"reference_{name}.npz"
            if ref.exists():
                with np.load(ref, allow_pickle=False) as data:
                    self.reference[name] = [data[f"arr_{i}"] for i in range(len(data.files))]
        budget = self.folder / BUDGET_FILE
        if budget.exists():
            self.budget = json.loads(budget.read_text())
        names = self.folder / DIMS_FILE
        if names.exists():
            self.leaf_names = [tuple(n) if n is not None else None for n in json.loads(names.read_text())]
        return p.Loaded(tuple(sorted(self.inputs)), tuple(sorted(self.reference)))

    def _program(self, name: str) -> Any:
        from xtat.build.builder import load_program

        assert self.folder is not None and "/" not in name
        if name not in self.programs:
            self.programs[name] = load_program((self.folder / name).read_bytes())
        return self.programs[name]

    def _shardings(self, layout: str) -> tuple | None:
        from xtat.stages.sharding.layouts import Layout, shardings

        if not layout:
            return None
        if layout not in self.shardings:
            names = self.leaf_names or [None] * len(self.inputs[p.InputSet.MAIN][0])
            self.shardings[layout] = tuple(shardings(Layout.parse(layout), names))
        return self.shardings[layout]

    def _inputs(self, layout: str, input_set: p.InputSet) -> tuple[tuple, dict]:
        """An input set as a build of `layout` takes it: placed on its mesh once, then reused."""
        import jax

        if not layout:
            return self.inputs[input_set]
        if (layout, input_set) not in self.placed:
            args, kwargs = self.inputs[input_set]
            shardings = self._shardings(layout) or ()
            self.placed[(layout, input_set)] = (tuple(jax.device_put(np.asarray(a), s)
                                                      for a, s in zip(args, shardings, strict=True)), kwargs)
        return self.placed[(layout, input_set)]

    def compile(self, request: p.Compile) -> p.Compiled | p.Failed:
        from xtat.build.builder import build
        from xtat.model.features import compile_metrics
        from xtat.runner import faults

        id = request.id
        key = json.dumps([request.program, request.options, request.layout], sort_keys=True)
        cached = key in self.cache
        try:
            faults.inject(id, "compile", request.is_default)
            args, kwargs = self._inputs(request.layout, p.InputSet.MAIN)
            if cached:
                self.cache.move_to_end(key)
                built, metrics = self.cache[key]
            else:
                built = build(self._program(request.program), args, kwargs, request.options,
                              self._shardings(request.layout))
                metrics = compile_metrics(built.compiled)
        except Exception as exc:
            return _failed(exc, TrialStatus.COMPILE_ERROR)
        self.layouts[id] = request.layout
        self.cache[key] = (built, metrics)
        while len(self.cache) > COMPILE_CACHE_SIZE:
            self.cache.popitem(last=False)
        self.built[id] = built
        who = DEFAULT_ID if request.is_default else id  # the reference of paired timing is the default
        self.slowdown_s[id] = faults.slowdown_s(who)
        if faults.is_lazy(who):
            self.lazy[id] = None
        # compile_s stays the build's real compile time (a trial's property); `cached` says none was spent now.
        return p.Compiled(built.compile_s, built.exe_hash, metrics, cached)

    def deploy(self, request: p.Deploy) -> p.Deployed | p.Failed:
        """Build the way `xtat.jit` and a preset deploy: `jax.jit(program, compiler_options=options)`,
        compiled by its first call and called through jax's own dispatch; then verify its outputs."""
        import jax

        from xtat.build.source_program import SourceProgram
        from xtat.runner import faults

        id = request.id
        start = time.perf_counter()
        try:
            faults.inject(id, "compile", request.is_default)
            program = self._program(request.program)
            arguments = None
            if request.as_called:
                if request.layout or not isinstance(program, SourceProgram):
                    raise ValueError("a build deployed as called needs a Source program file and no layout")
                jitted = jax.jit(program.called, compiler_options=request.options or None)
                arguments = {name: program.arguments(leaves) for name, (leaves, _) in self.inputs.items()}
            else:
                layout: dict[str, Any] = ({} if not request.layout
                                          else {"in_shardings": self._shardings(request.layout)})
                jitted = jax.jit(program.call, compiler_options=request.options or None, **layout)
            deployed = _Deployed(jitted, arguments)
            jax.block_until_ready(deployed.called(p.InputSet.MAIN, *self._inputs(request.layout, p.InputSet.MAIN)))
        except Exception as exc:
            return _failed(exc, TrialStatus.COMPILE_ERROR)
        self.layouts[id] = request.layout
        self.built[id] = deployed
        self.slowdown_s[id] = faults.slowdown_s(id)
        if faults.is_lazy(id):
            self.lazy[id] = None
        try:
            check = self._check(id, p.InputSet.MAIN, request.tolerance)
        except Exception as exc:
            return _failed(exc, TrialStatus.RUN_ERROR)
        if not check.verified:
            return p.Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)
        return p.Deployed(time.perf_counter() - start)

    def _call(self, id: str, input_set: p.InputSet) -> Any:
        import jax

        if self.lazy.get(id) is not None:  # test-only fault: the first result again, without computing
            return self.lazy[id]
        args, kwargs = self._inputs(self.layouts.get(id, ""), input_set)
        built = self.built[id]
        out = built.called(input_set, args, kwargs) if isinstance(built, _Deployed) else built.compiled(*args, **kwargs)
        if id in self.lazy:  # test-only fault: this first result is the one given again
            self.lazy[id] = jax.block_until_ready(out)
            return self.lazy[id]
        if self.slowdown_s.get(id):
            time.sleep(self.slowdown_s[id])  # test-only fault
        return jax.block_until_ready(out)

    def _outputs(self, id: str, input_set: p.InputSet, phase: str = "run") -> list[np.ndarray]:
        import jax

        from xtat.capture.arguments import is_typed_key
        from xtat.runner import faults

        # Typed keys as their data, as the flat program returns them (a build deployed as called returns keys).
        outputs = [np.asarray(jax.random.key_data(leaf) if is_typed_key(leaf) else leaf)
                   for leaf in jax.tree.leaves(self._call(id, input_set))]
        self.checks[id] = self.checks.get(id, -1) + 1
        return faults.corrupted(outputs, id, phase, self.checks[id])

    def reference_outputs(self, request: p.ReferenceOutputs) -> p.Referenced:
        """Run the default build on every input set and keep its outputs as the reference; then
        calibrate the verification budget from runs on one-ulp-perturbed inputs (`verify.calibrate`)."""
        import jax

        from xtat.runner.verify import CALIBRATION_RUNS, Tolerance, compare, perturbed
        from xtat.runner.verify import calibrate as calibrate_budget

        assert self.folder is not None
        id = request.id
        for name in self.inputs:
            outputs = self._outputs(id, name)
            self.reference[name] = outputs
            np.savez(self.folder / f"reference_{name}.npz", *outputs)
        if not request.calibrate:
            return p.Referenced(self.budget)
        runs = []
        for name, (args, _) in self.inputs.items():
            for seed in range(CALIBRATION_RUNS):
                moved = [jax.device_put(x) for x in perturbed([np.asarray(a) for a in args], seed)]
                outputs = [np.asarray(leaf) for leaf in jax.tree.leaves(
                    jax.block_until_ready(self.built[id].compiled(*moved)))]
                runs.append(compare(outputs, self.reference[name], Tolerance()))
        self.budget = calibrate_budget(runs, len(self.reference[p.InputSet.MAIN])).to_json()
        (self.folder / BUDGET_FILE).write_text(json.dumps(self.budget))
        return p.Referenced(self.budget)

    def _check(self, id: str, input_set: p.InputSet, tolerance: Tolerance, phase: str | None = None) -> p.Check:
        from xtat.runner.verify import Budget, compare

        phase = phase or ("verify" if input_set is p.InputSet.VERIFY else "run")
        outputs = self._outputs(id, input_set, phase)
        self._inputs_intact(input_set)
        result = compare(outputs, self.reference[input_set], tolerance, Budget.from_json(self.budget))
        return p.Check(
            result.ok, _finite_or_none(result.max_abs_err), _finite_or_none(result.max_rel_err), result.message,
            tuple(m.to_json() for m in result.mismatches),
            # how close it came: what the policy's thresholds are chosen from (benchmarks/verification_sweep.py)
            {"excess": max((st.excess for st in result.stats.values()), default=0.0),
             "spread": max((st.spread for st in result.stats.values()), default=0.0),
             "norm": max((st.norm for st in result.stats.values()), default=0.0)},
        )

    def _inputs_intact(self, input_set: p.InputSet) -> None:
        """A build that writes into its argument buffers (seen with copy-insertion switched off)
        would corrupt every later measurement in this worker: refuse it and restore the inputs."""
        import jax

        placed = [args for (_, name), (args, _) in self.placed.items() if name == input_set]
        if all(np.array_equal(np.asarray(leaf), copy, equal_nan=copy.dtype.kind in "fc")
               for args in (self.inputs[input_set][0], *placed) for leaf, copy in zip(args, self.pristine[input_set])):
            return
        self.inputs[input_set] = (tuple(jax.device_put(np.array(x, copy=True)) for x in self.pristine[input_set]), {})
        self.placed = {key: value for key, value in self.placed.items() if key[1] != input_set}
        raise RuntimeError("the build wrote into its input buffers (they changed while it ran); inputs restored")

    def _verified(self, id: str, tolerance: Tolerance, is_default: bool) -> p.Check:
        """The build's check on the main inputs and, if that passes, on the second set (also its warm-up)."""
        from xtat.runner import faults

        faults.inject(id, "run", is_default)
        check = self._check(id, p.InputSet.MAIN, tolerance)
        if check.verified and p.InputSet.VERIFY in self.reference:
            # A second input set catches stale or cached outputs that match on the first.
            second = self._check(id, p.InputSet.VERIFY, tolerance, phase="run")
            if not second.verified:
                check = dataclasses.replace(second, mismatch=f"on the second input set: {second.mismatch}")
        return check

    def measure(self, request: p.Measure) -> p.Timed | p.Failed:
        """Verify on both input sets, then time alone: warm-up, calibrate, samples (the default's
        own figure; candidates are timed in pairs with it: `prepare`)."""
        from xtat.runner.timing import calibrate, median_ci, sample

        id, policy = request.id, request.timing
        start = time.perf_counter()
        try:
            check = self._verified(id, request.tolerance, request.is_default)
            if not check.verified:
                return p.Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)
            call = lambda: self._call(id, p.InputSet.MAIN)  # noqa: E731
            inner = calibrate(call, policy)
            samples = [sample(call, inner) for _ in range(policy.samples)]
        except Exception as exc:
            return _failed(exc, TrialStatus.RUN_ERROR)
        median, low, high = median_ci(samples, seed=policy.seed)
        return p.Timed(tuple(samples), inner, median, (low, high), time.perf_counter() - start, False, check)

    def prepare(self, request: p.Prepare) -> p.Prepared | p.Failed:
        """Verify as `measure` does, then calibrate: the parent takes the samples, paired."""
        from xtat.runner.timing import calibrate

        try:
            check = self._verified(request.id, request.tolerance, False)
            if not check.verified:
                return p.Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)
            return p.Prepared(calibrate(lambda: self._call(request.id, p.InputSet.MAIN), request.timing), check)
        except Exception as exc:
            return _failed(exc, TrialStatus.RUN_ERROR)

    def verify(self, request: p.Verify) -> p.Verified | p.Failed:
        from xtat.runner import faults

        if request.input_set not in self.inputs:
            return p.Failed(TrialStatus.RUN_ERROR, f"no input set {request.input_set!r}")
        try:
            faults.inject(request.id, "verify", False)
            check = self._check(request.id, request.input_set, request.tolerance)
        except Exception as exc:
            return _failed(exc, TrialStatus.RUN_ERROR)
        return p.Verified(check) if check.verified else p.Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)

    def calibrate(self, request: p.Calibrate) -> p.Calibrated:
        """Inner repeats for one sample of this build (the first call also warms it up)."""
        from xtat.runner import faults
        from xtat.runner.timing import calibrate

        faults.inject(request.id, "run", request.id == "default")  # placed side by side, or confirmed
        call = lambda: self._call(request.id, p.InputSet.MAIN)  # noqa: E731
        call()
        return p.Calibrated(calibrate(call, request.timing))

    def sample(self, request: p.Sample) -> p.Sampled:
        """One timing sample; the parent interleaves samples of several builds (ABCABC...)."""
        from xtat.runner.timing import sample

        return p.Sampled(sample(lambda: self._call(request.id, p.InputSet.MAIN), request.inner))

    def release(self, request: p.Release) -> p.Done:
        """Forget builds by id; the compile cache may keep their executables a while longer."""
        for id in request.ids:
            self.built.pop(id, None)
        return p.Done()

    def handle(self, request: p.Request) -> p.Reply:
        return _HANDLERS[type(request)](self, request)


# Each request record's handler, looked up per message (a sample request among them).
_HANDLERS: dict[type, Callable[[Worker, Any], p.Reply]] = {
    p.LoadRun: Worker.load, p.Compile: Worker.compile, p.Deploy: Worker.deploy,
    p.ReferenceOutputs: Worker.reference_outputs, p.Measure: Worker.measure, p.Prepare: Worker.prepare,
    p.Verify: Worker.verify,
    p.Calibrate: Worker.calibrate, p.Sample: Worker.sample, p.Release: Worker.release,
}


class _Deployed:
    """A deployed build: called as jax.jit is, so `compiled` is the jitted function itself. Deployed
    as called, it holds the user's argument tree per input set (`arguments`), built once, and is
    called on that instead of the flat arrays."""

    def __init__(self, jitted: Any, arguments: dict[p.InputSet, tuple[tuple, dict]] | None = None) -> None:
        self.compiled = jitted
        self.arguments = arguments

    def called(self, input_set: p.InputSet, args: tuple, kwargs: dict) -> Any:
        if self.arguments is not None:
            args, kwargs = self.arguments[input_set]
        return self.compiled(*args, **kwargs)


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 4000 else text[:4000] + " ..."


def main() -> None:
    from xtat.core.candidate import ProcessSetup
    from xtat.runner.pool import die_with_parent

    die_with_parent()
    ProcessSetup.from_environment().enter()  # the candidate's CPU count and host devices, before jax starts
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker()
    for line in sys.stdin:
        reply: p.Reply
        try:
            request = p.decode_request(line)
            if isinstance(request, p.Exit):
                break
            reply = worker.handle(request)
        except Exception as exc:  # a bug or bad request: report, stay alive
            reply = p.Failed(TrialStatus.RUN_ERROR, _error_text(exc), trace=traceback.format_exc())
        protocol.write(p.encode(reply) + "\n")


if __name__ == "__main__":
    main()
