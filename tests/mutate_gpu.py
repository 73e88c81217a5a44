"""Mutation check of the GPU paths tested on CPU (tests/test_gpu.py): each behaviour removed in turn must
fail its tests.

    .venv/bin/python tests/mutate_gpu.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

T = "tests/test_gpu.py"
R = "src/xtat/stages/tiles/results.py"
S = "src/xtat/stages/tiles/stage.py"
M = [Mutation(*m) for m in [
 ("tile edit", R, "            setattr(entry.result.triton, parameter, value)", "            pass", T),
 ("edit every entry", R, "        for entry in entries:\n            setattr", "        for entry in entries[:0]:\n            setattr", T),
 ("fusion id", R, "    return \"fusion-\" + hashlib.sha256(hlo.encode()).hexdigest()[:12]",
  "    return \"fusion-\" + hashlib.sha256(hlo[:40].encode()).hexdigest()[:12]", T),
 ("unknown fusion", R, "        if not entries:\n            raise", "        if not entries:\n            continue\n            raise", T),
 ("value range", R, "or value not in PARAMETERS[parameter]:\n            raise ResultsError", "and False:\n            raise ResultsError", T),
 ("dot bound", R, "            values = tuple(v for v in values if v <= limit)", "            pass", T),
 ("batch dims", R, "if i not in lhs_batch and i not in lhs_contracting)", "if i not in lhs_contracting)", T),
 ("XLA's choice default", S, "                                              point.chosen[parameter]))", "                                              values[-1]))", T),
 ("pin applied", S, "        return replace(candidate, process=replace(candidate.process, autotune_results=text))", "        return candidate", T),
 ("autotuner replaced", S, "        if REPLACES_AUTOTUNING & set(candidate.compile_options):", "        if False:", T),
 ("merge keeps the pin", R, "        if (entry.device, entry.hlo) not in known:", "        if True:", T),
 ("file in XLA_FLAGS", "src/xtat/core/candidate.py", "        if self.autotune_results:\n            env[\"XLA_FLAGS\"]", "        if False:\n            env[\"XLA_FLAGS\"]", T),
 ("flag not in identity", "src/xtat/capture/workload.py", "(HOST_DEVICES_FLAG + \"=\", AUTOTUNE_FLAG + \"=\")", "(HOST_DEVICES_FLAG + \"=\",)", T),
 ("deploy pins", "src/xtat/apply/lookup.py", "            stage.pin_to(autotune_results)", "            pass", T),
 ("jit loads the file", "src/xtat/apply/lookup.py", "        if not results:\n            return self.candidate.compile_options",
  "        if True:\n            return self.candidate.compile_options", T),
 ("one device", "src/xtat/runner/pool.py", "            base[\"CUDA_VISIBLE_DEVICES\"] = device", "            pass", T),
 ("least recently used", "src/xtat/runner/pool.py", "            self._workers[setup] = self._workers.pop(setup)  # most recently used last",
  "            pass", T),
 ("a layout's GPUs", "src/xtat/runner/host_lock.py", "[str(i) for i in range(count)])[:count])",
  "[str(i) for i in range(count)])[:1])", T + " -k layout_over"),
 ("each GPU's lock held", "src/xtat/runner/host_lock.py",
  "        for path in sorted([Path(paths)] if isinstance(paths, (str, Path)) else paths):",
  "        for path in sorted([Path(paths)] if isinstance(paths, (str, Path)) else paths)[:1]:", T + " -k layout_over"),
 ("tiles vet", S, "            if platform not in GPU_PLATFORMS:\n                found.append", "            if False:\n                found.append", T),
]]

sys.exit(check(M))
