"""Worker process: compiles, verifies and times candidates on request.

Started by `runner.pool` as `python -m xtat.runner.worker` in its own process
group, with the environment its runtime decisions call for. It speaks JSON
lines: requests on stdin, one reply per request on a private copy of stdout
(fd 1 itself is pointed at stderr so that stray prints from XLA or user code
cannot corrupt the protocol). Anything that kills the process is the
parent's to classify.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path

import numpy as np

INPUT_SETS = ("main", "verify")
BUDGET_FILE = "budget.json"
COMPILE_CACHE_SIZE = 4


def _is_oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in text or "Out of memory" in text


class Worker:
    def __init__(self) -> None:
        self.programs: dict[str, object] = {}  # exported programs by file name
        self.folder: Path | None = None
        self.inputs: dict[str, tuple[tuple, dict]] = {}
        self.reference: dict[str, list[np.ndarray]] = {}
        self.pristine: dict[str, list[np.ndarray]] = {}  # host copies of the inputs, to detect writes into them
        self.budget: dict = {}  # verify.Budget as JSON: what a chaotic output may move (calibrated once)
        self.built: dict[str, object] = {}
        # Compile cache: recent builds by (program, options), kept after `release`, so a
        # config compiled before in this worker (the default after its reference run, a
        # config asked again) is not compiled again. Bounded: executables hold memory.
        self.cache: OrderedDict[str, tuple[object, dict]] = OrderedDict()
        self.slowdown_s: dict[str, float] = {}
        self.lazy: dict[str, object] = {}  # test-only fault: builds that return stale outputs
        self.checks: dict[str, int] = {}  # output checks per build (for the test-only flaky fault)

    # -- requests -----------------------------------------------------------

    def load(self, folder: str) -> dict:
        import jax

        from xtat.build.builder import load_program

        self.folder = Path(folder)
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
        return {"ok": True, "input_sets": sorted(self.inputs), "has_reference": sorted(self.reference)}

    def _program(self, name: str):
        from xtat.build.builder import load_program

        assert self.folder is not None and "/" not in name
        if name not in self.programs:
            self.programs[name] = load_program((self.folder / name).read_bytes())
        return self.programs[name]

    def compile(self, id: str, program: str, options: dict, is_default: bool = False) -> dict:
        from xtat.build.builder import build
        from xtat.runner import faults

        from xtat.model.features import compile_metrics

        args, kwargs = self.inputs["main"]
        key = json.dumps([program, options], sort_keys=True)
        cached = key in self.cache
        try:
            faults.inject(id, "compile", is_default)
            if cached:
                self.cache.move_to_end(key)
                built, metrics = self.cache[key]
            else:
                built = build(self._program(program), args, kwargs, options)
                metrics = compile_metrics(built.compiled)
        except Exception as exc:
            return {"ok": False, "status": "oom" if _is_oom(exc) else "compile_error", "error": _error_text(exc)}
        self.cache[key] = (built, metrics)
        while len(self.cache) > COMPILE_CACHE_SIZE:
            self.cache.popitem(last=False)
        self.built[id] = built
        self.slowdown_s[id] = faults.slowdown_s(id)
        if faults.is_lazy(id):
            self.lazy[id] = None
        # compile_s stays the build's real compile time (a trial's property); `cached` says none was spent now.
        return {"ok": True, "compile_s": built.compile_s, "exe_hash": built.exe_hash, "metrics": metrics,
                "cached": cached}

    def deploy(self, id: str, program: str, options: dict, tolerance: dict, is_default: bool = False) -> dict:
        """Build the way `xtat.jit` and a preset deploy: `jax.jit(program, compiler_options=options)`,
        compiled by its first call and called through jax's own dispatch; then verify its outputs."""
        import jax

        from xtat.runner import faults

        args, kwargs = self.inputs["main"]
        start = time.perf_counter()
        try:
            faults.inject(id, "compile", is_default)
            jitted = jax.jit(self._program(program).call, compiler_options=options or None)
            jax.block_until_ready(jitted(*args, **kwargs))
        except Exception as exc:
            return {"ok": False, "status": "oom" if _is_oom(exc) else "compile_error", "error": _error_text(exc)}
        self.built[id] = _Deployed(jitted)
        self.slowdown_s[id] = faults.slowdown_s(id)
        if faults.is_lazy(id):
            self.lazy[id] = None
        try:
            check = self._check(id, "main", tolerance)
        except Exception as exc:
            return {"ok": False, "status": "oom" if _is_oom(exc) else "run_error", "error": _error_text(exc)}
        if not check["verified"]:
            return {"ok": False, "status": "wrong_result", "error": check["mismatch"], **check}
        return {"ok": True, "compile_s": time.perf_counter() - start}

    def _call(self, id: str, input_set: str):
        import jax

        if id in self.lazy:  # test-only fault: the first result again, without computing
            if self.lazy[id] is None:
                args, kwargs = self.inputs[input_set]
                self.lazy[id] = jax.block_until_ready(self.built[id].compiled(*args, **kwargs))
            return self.lazy[id]
        args, kwargs = self.inputs[input_set]
        out = self.built[id].compiled(*args, **kwargs)
        if self.slowdown_s.get(id):
            time.sleep(self.slowdown_s[id])  # test-only fault
        return jax.block_until_ready(out)

    def _outputs(self, id: str, input_set: str, phase: str = "run") -> list[np.ndarray]:
        import jax

        from xtat.runner import faults

        outputs = [np.asarray(leaf) for leaf in jax.tree.leaves(self._call(id, input_set))]
        self.checks[id] = self.checks.get(id, -1) + 1
        return faults.corrupted(outputs, id, phase, self.checks[id])

    def reference_outputs(self, id: str, calibrate: bool = True) -> dict:
        """Run the default build on every input set and keep its outputs as the reference; then
        calibrate the verification budget from runs on one-ulp-perturbed inputs (`verify.calibrate`)."""
        import jax

        from xtat.runner.verify import CALIBRATION_RUNS, Tolerance, calibrate as calibrate_budget, compare, perturbed

        assert self.folder is not None
        for name in self.inputs:
            outputs = self._outputs(id, name)
            self.reference[name] = outputs
            np.savez(self.folder / f"reference_{name}.npz", *outputs)
        if not calibrate:
            return {"ok": True, "budget": self.budget}
        runs = []
        for name, (args, _) in self.inputs.items():
            for seed in range(CALIBRATION_RUNS):
                moved = [jax.device_put(x) for x in perturbed([np.asarray(a) for a in args], seed)]
                outputs = [np.asarray(leaf) for leaf in jax.tree.leaves(
                    jax.block_until_ready(self.built[id].compiled(*moved)))]
                runs.append(compare(outputs, self.reference[name], Tolerance()))
        self.budget = calibrate_budget(runs, len(self.reference["main"])).to_json()
        (self.folder / BUDGET_FILE).write_text(json.dumps(self.budget))
        return {"ok": True, "budget": self.budget}

    def _check(self, id: str, input_set: str, tolerance: dict, phase: str | None = None) -> dict:
        from xtat.runner.verify import Budget, Tolerance, compare

        phase = phase or ("verify" if input_set == "verify" else "run")
        outputs = self._outputs(id, input_set, phase)
        self._inputs_intact(input_set)
        result = compare(outputs, self.reference[input_set], Tolerance(**tolerance), Budget.from_json(self.budget))
        return {
            "verified": result.ok,
            "max_abs_err": _finite_or_none(result.max_abs_err),
            "max_rel_err": _finite_or_none(result.max_rel_err),
            "mismatch": result.message,
            "mismatches": [m.to_json() for m in result.mismatches],
            # how close it came: what the policy's thresholds are chosen from (benchmarks/verification_sweep.py)
            "closest": {"excess": max((st.excess for st in result.stats.values()), default=0.0),
                        "spread": max((st.spread for st in result.stats.values()), default=0.0),
                        "norm": max((st.norm for st in result.stats.values()), default=0.0)},
        }

    def _inputs_intact(self, input_set: str) -> None:
        """A build that writes into its argument buffers (seen with copy-insertion switched off)
        would corrupt every later measurement in this worker: refuse it and restore the inputs."""
        import jax

        args, _ = self.inputs[input_set]
        if all(np.array_equal(np.asarray(leaf), copy, equal_nan=copy.dtype.kind in "fc")
               for leaf, copy in zip(args, self.pristine[input_set])):
            return
        self.inputs[input_set] = (tuple(jax.device_put(np.array(x, copy=True)) for x in self.pristine[input_set]), {})
        raise RuntimeError("the build wrote into its input buffers (they changed while it ran); inputs restored")

    def measure(self, id: str, tolerance: dict, timing: dict, is_default: bool = False,
                race: dict | None = None) -> dict:
        """Verify on the main inputs, then time: warm-up, calibrate, samples.

        With `race` ({"incumbent_s", "margin", "min_samples"}) timing stops early once the
        build is clearly slower than the incumbent (`timing.Race`); the reply says `raced`.
        """
        from xtat.runner import faults
        from xtat.runner.timing import Race, TimingPolicy, calibrate, median_ci, sample

        policy = TimingPolicy(**timing)
        start = time.perf_counter()
        try:
            faults.inject(id, "run", is_default)
            check = self._check(id, "main", tolerance)  # also the warm-up call
            if check["verified"] and "verify" in self.reference:
                # A second input set catches stale or cached outputs that match on the first.
                second = self._check(id, "verify", tolerance, phase="run")
                if not second["verified"]:
                    second["mismatch"] = f"on the second input set: {second['mismatch']}"
                    check = second
            if not check["verified"]:
                return {"ok": False, "status": "wrong_result", "error": check["mismatch"], **check}
            call = lambda: self._call(id, "main")  # noqa: E731
            inner = calibrate(call, policy)
            racing = Race(**race) if race else None
            samples: list[float] = []
            raced = False
            while len(samples) < policy.samples and not raced:
                samples.append(sample(call, inner))
                raced = racing is not None and len(samples) < policy.samples and racing.lost(samples)
        except Exception as exc:
            return {"ok": False, "status": "oom" if _is_oom(exc) else "run_error", "error": _error_text(exc)}
        median, low, high = median_ci(samples, seed=policy.seed)
        return {
            "ok": True, "samples": samples, "inner": inner, "median_s": median, "ci_s": [low, high],
            "measure_s": time.perf_counter() - start, "raced": raced, **check,
        }

    def verify(self, id: str, input_set: str, tolerance: dict) -> dict:
        from xtat.runner import faults

        if input_set not in self.inputs:
            return {"ok": False, "status": "run_error", "error": f"no input set {input_set!r}"}
        try:
            faults.inject(id, "verify", False)
            check = self._check(id, input_set, tolerance)
        except Exception as exc:
            return {"ok": False, "status": "oom" if _is_oom(exc) else "run_error", "error": _error_text(exc)}
        return {"ok": check["verified"], **check}

    def calibrate(self, id: str, timing: dict) -> dict:
        """Inner repeats for one sample of this build (the first call also warms it up)."""
        from xtat.runner.timing import TimingPolicy, calibrate

        call = lambda: self._call(id, "main")  # noqa: E731
        call()
        return {"ok": True, "inner": calibrate(call, TimingPolicy(**timing))}

    def sample(self, id: str, inner: int) -> dict:
        """One timing sample; the parent interleaves samples of several builds (ABCABC...)."""
        from xtat.runner.timing import sample

        return {"ok": True, "seconds": sample(lambda: self._call(id, "main"), inner)}

    def release(self, ids: list[str]) -> dict:
        """Forget builds by id; the compile cache may keep their executables a while longer."""
        for id in ids:
            self.built.pop(id, None)
        return {"ok": True}


class _Deployed:
    """A deployed build: called as jax.jit is, so `compiled` is the jitted function itself."""

    def __init__(self, jitted) -> None:
        self.compiled = jitted


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) < 4000 else text[:4000] + " ..."


def _apply_runtime() -> None:
    """Runtime stage: XLA reads the affinity (thread pool) and XLA_FLAGS (host device count)
    once at start-up, so both are set before jax loads."""
    from xtat.stages.runtime import ENV_CPUS, ENV_HOST_DEVICES, with_host_devices

    cpus = os.environ.get(ENV_CPUS)
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    devices = os.environ.get(ENV_HOST_DEVICES)
    if devices:
        os.environ["XLA_FLAGS"] = with_host_devices(os.environ.get("XLA_FLAGS", ""), int(devices))


def main() -> None:
    from xtat.runner.pool import die_with_parent

    die_with_parent()
    _apply_runtime()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    worker = Worker()
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        if op == "exit":
            break
        try:
            reply = getattr(worker, op)(**request)
        except Exception as exc:  # a bug or bad request: report, stay alive
            reply = {"ok": False, "status": "run_error", "error": _error_text(exc), "trace": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
