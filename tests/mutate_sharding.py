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
  "        if not layout:\n            return None\n        if layout not in self.shardings:",
  "        if True:\n            return None\n        if layout not in self.shardings:", T + " -k two_host_devices"),
 ("divisibility", L, "if all(s % axis_size[axis] == 0 for s in sizes[name])]", "]", T),
 ("no two axes on one mesh axis", L, "            if any(_clashes(array, mapping) for array in named):", "            if False:", T),
 ("two-axis meshes", L, "            found.append(((\"data\", data), (\"model\", devices // data)))", "            pass", T),
 ("layout notation checked", L, "        if (axes != [a for a in AXES if a in axes] or any(size < 2 for _, size in mesh)",
  "        if False and (axes != [a for a in AXES if a in axes] or any(size < 2 for _, size in mesh)", T),
 ("jax's placement is the default", "src/xtat/stages/sharding/stage.py",
  "(layout.notation() for layout in layouts)), \"\")]", "(layout.notation() for layout in layouts)), layouts[0].notation())]", T),
 ("batch-only without declarations", "src/xtat/capture/workload.py",
  "        batch = [(\"batch\",) + (\"\",) * (len(shape) - 1) if shape else None for shape in last]",
  "        batch = [None for shape in last]", T),
 ("declared rank checked", "src/xtat/capture/dimnames.py", "        if names is not None and len(names) != len(shape):", "        if False:", T),
 ("xtat.jit places the inputs", "src/xtat/apply/jit.py",
  "        return self._entry(route) if route.shardings is None else self._placing(route)",
  "        return self._entry(route)", T + " -k xtat_jit"),
 ("marks join the enumeration", "src/xtat/stages/sharding/stage.py",
  "enumerate_layouts([*context.input_dims, *context.marks], context.devices)",
  "enumerate_layouts([*context.input_dims], context.devices)", T + " -k marked"),
 ("capture records the marks", "src/xtat/capture/workload.py", "        marks = recording.seen", "        marks = []",
  T + " -k marked"),
 ("constrain checks its rank", "src/xtat/capture/dimnames.py", "    if len(declared.names) != len(shape):", "    if False:",
  T + " -k constrain"),
 ("a layout's program exported in its placement", "src/xtat/tuning/session.py",
  "export_flat(in_placement(fn, parsed), args", "export_flat(fn, args", T + " -k marked"),
 ("the runner exports a program per layout", "src/xtat/runner/process.py",
  "    return dict(candidate.program), candidate.layout if layout_in_program else \"\"",
  "    return dict(candidate.program), \"\"", T + " -k marks_intermediates"),
 ("xtat.jit lays out marked intermediates", "src/xtat/apply/jit.py",
  "            fn = in_placement(fn, Layout.parse(layout)) if layout else fn", "            pass", T + " -k marked"),
 ("the python preset places the inputs", "src/xtat/apply/preset.py",
  "    return _placing(jitted, layout, jit_kwargs) if layout else jitted", "    return jitted", T + " -k preset"),
 ("program ids skip a layout's constraints", "src/xtat/stages/program/points.py",
  "        number += eqn.primitive.name not in LAYOUT_ONLY", "        number += 1", T + " -k program_stage"),
 ("autodiff's reshards are the layout's", "src/xtat/stages/program/points.py",
  "LAYOUT_ONLY = frozenset({\"sharding_constraint\", \"reshard\"})", "LAYOUT_ONLY = frozenset({\"sharding_constraint\"})",
  T + " -k program_stage"),
 ("barriers reach their consumer through a constraint", "src/xtat/stages/program/rewriting.py",
  "                operand = jaxpr.eqns[point.eqn].invars[point.operand]",
  "                operand = jaxpr.eqns[point.producer].outvars[0]", T + " -k program_stage"),
]]

sys.exit(check(M))
