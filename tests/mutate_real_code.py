"""Mutation check of issue 16's tests (users' code): each behaviour removed in turn must fail its tests.

    .venv/bin/python tests/mutate_real_code.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

ARGUMENTS = "src/xtat/capture/arguments.py"
REAL = "tests/test_real_code.py"
M = [
    Mutation("typed keys not rewrapped", ARGUMENTS,
             "values = [x if leaf.key_impl is None else", "values = [x if True else", REAL),
    Mutation("key outputs left typed", ARGUMENTS,
             "return [jax.random.key_data(o) if is_typed_key(o) else o for o in",
             "return [o for o in", REAL),
    Mutation("Python scalars strongly typed", ARGUMENTS,
             "array, weak = np.asarray(leaf, dtype=aval.dtype), True",
             "array, weak = np.asarray(leaf, dtype=aval.dtype), False", REAL),
    Mutation("static values not bound", ARGUMENTS,
             "        if not static:\n            return fn, args, kwargs",
             "        if True:\n            return fn, args, kwargs", REAL),
    Mutation("jit wrapper's options dropped", ARGUMENTS,
             "return Unwrapped(wrapped, {name: tuple(value) for name, value in options.items() if value})",
             "return Unwrapped(wrapped, {})", REAL),
    Mutation("jit wrapper not unwrapped", ARGUMENTS, "    if info is not None:", "    if False:", REAL),
    Mutation("equinox wrapper not recognized", ARGUMENTS,
             'if kind.__module__.startswith("equinox") and kind.__name__ == "_JitWrapper":', "if False:",
             "tests/test_gallery.py -k equinox"),
    Mutation("non-array leaf let through", ARGUMENTS,
             "        else:\n            raise UserError(\n                f\"{what}: {name} is a",
             "        else:\n            array, weak = np.asarray(leaf), False\n        if False:\n"
             "            raise UserError(\n                f\"{what}: {name} is a", REAL),
    Mutation("make_inputs statics unchecked", "src/xtat/capture/workload.py",
             "        if not _same_statics(static, fresh_static):", "        if False:", REAL),
    Mutation("worker's program key unchecked", "src/xtat/build/source_program.py",
             "        if program_key(lowered.as_text(), describe_avals(lowered)) != source.program_key:",
             "        if False:", REAL + " -k traces_another"),
    Mutation("callback program without source accepted", "src/xtat/capture/workload.py",
             "        if workload.source is None:\n            raise UserError(",
             "        if False:\n            raise UserError(", REAL + " -k importable"),
    Mutation("names without the stem", "src/xtat/capture/targets.py",
             'return f"{Path(where).stem}:{attr}" if', "return attr if", REAL + " -k named"),
    Mutation("colliding names kept", "src/xtat/compare/runs.py",
             "dataclasses.replace(w, name=target) if slugs.count(slug) > 1 else w", "w", REAL + " -k named"),
    Mutation("no deployment note", "src/xtat/tuning/adoption.py",
             "    if not candidate.process:\n        return \"\"", "    if True:\n        return \"\"", REAL + " -k deploy_it"),
    Mutation("no combination after the sweep", "src/xtat/search/sweep.py",
             "        combination = self._combine()", "        combination = None",
             "tests/test_strategies.py -k combines"),
]

sys.exit(check(M))
