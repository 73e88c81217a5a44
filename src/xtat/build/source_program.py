"""A `Source` program file loaded in a worker: the target imported, traced and checked."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from xtat.capture.source import Source


class SourceProgram:
    """Stands where a deserialized `jax.export` program would: `call` takes the flat input arrays.

    It can also be called as the user calls it (`called` with `arguments`): the function over the
    user's own argument tree, rebuilt once from the flat arrays, so that jax does on each call the
    host work (flattening the tree) the user's step does."""

    def __init__(self, source: Source):
        import jax

        from xtat.capture.arguments import flat_function, input_leaves
        from xtat.capture.targets import load_target
        from xtat.capture.workload import describe_avals, program_key

        sys.path.extend(p for p in source.sys_path if p not in sys.path)
        workload = load_target(source.target)
        lowered = jax.jit(workload.fn, **workload.jit_options).lower(*workload.args, **(workload.kwargs or {}))
        if program_key(lowered.as_text(), describe_avals(lowered)) != source.program_key:
            raise RuntimeError(
                f"the worker imported {source.target} and traced another program than the tuner did; a target "
                "traced in workers must build the same program and input shapes on every import (seed its inputs)"
            )
        fn, args, kwargs = workload.bound()
        if source.decisions:
            from xtat.stages.program import rewrite

            fn = rewrite(fn, source.decisions)
        if source.layout:  # marked intermediates laid out by the candidate's layout when jax traces it
            from xtat.stages.sharding.layouts import Layout, in_placement

            fn = in_placement(fn, Layout.parse(source.layout))
        self.call: Callable[..., Any]
        self.call, _ = flat_function(fn, args, kwargs)
        self.called = fn  # jit it and call it with `arguments`
        self._tree = jax.tree.structure((args, kwargs))
        self._leaves, _ = input_leaves(args, kwargs, "args")

    def arguments(self, arrays: tuple) -> tuple[tuple, dict]:
        """The user's (args, kwargs) tree holding the flat input `arrays` (typed keys wrapped again,
        Python scalars as Python scalars, as jax.jit traced them)."""
        import jax

        from xtat.capture.arguments import as_leaves

        values = [x.item() if leaf.weak_type else x for x, leaf in zip(as_leaves(arrays, self._leaves), self._leaves)]
        return jax.tree.unflatten(self._tree, values)

