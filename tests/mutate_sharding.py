"""Mutation check of the sharding tests (tests/test_sharding.py): each behaviour removed in turn must fail
its tests.

    .venv/bin/python tests/mutate_sharding.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

T = "tests/test_sharding.py"
L = "src/xtat/stages/sharding/layouts.py"
M = [Mutation(*m) for m in [
 ("worker places by layout", "src/xtat/runner/worker.py",
  "        if not layout:\n            return None\n        return tuple(shardings(",
  "        if True:\n            return None\n        return tuple(shardings(", T + " -k two_host_devices"),
 ("divisibility", L, "if all(s % axis_size[axis] == 0 for s in sizes[name])]", "]", T),
 ("no two axes on one mesh axis", L, "            if any(_clashes(array, mapping) for array in named):", "            if False:", T),
 ("two-axis meshes", L, "            found.append(((\"data\", data), (\"model\", devices // data)))", "            pass", T),
 ("layout notation checked", L, "        if (axes != [a for a in AXES if a in axes] or any(size < 2 for _, size in mesh)",
  "        if False and (axes != [a for a in AXES if a in axes] or any(size < 2 for _, size in mesh)", T),
 ("jax's placement is the default", "src/xtat/stages/sharding/stage.py",
  "(layout.notation() for layout in layouts)), \"\")]", "(layout.notation() for layout in layouts)), layouts[0].notation())]", T),
 ("batch-only without declarations", "src/xtat/workload.py",
  "        batch = [(\"batch\",) + (\"\",) * (len(shape) - 1) if shape else None for shape in last]",
  "        batch = [None for shape in last]", T),
 ("declared rank checked", "src/xtat/dims.py", "        if names is not None and len(names) != len(shape):", "        if False:", T),
 ("xtat.jit places the inputs", "src/xtat/apply/jit.py",
  "        if route.shardings is None:\n            return self._entry(route)(*args, **kwargs)",
  "        if True:\n            return self._entry(route)(*args, **kwargs)", T + " -k xtat_jit"),
]]

sys.exit(check(M))
