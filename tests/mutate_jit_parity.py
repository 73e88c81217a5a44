"""Mutation check of the parity matrix: each behaviour of xtat.jit removed in turn must fail its cases.

    .venv/bin/python tests/mutate_jit_parity.py [MUTATION ...]

Each mutation edits src/xtat/apply/{jit,nesting}.py, runs tests/test_jit_parity.py,
prints the cases that failed, and restores the files. Not collected by pytest.
"""
import subprocess, sys, re, pathlib
p = pathlib.Path("src/xtat/apply/jit.py"); orig = p.read_text()
nest = pathlib.Path("src/xtat/apply/nesting.py"); norig = nest.read_text()
M = {
 "no __get__": (p, "    def __get__(self, instance", "    def _no_get(self, instance"),
 "no static inference": (p, "        if static_argnums is not None and static_argnames is None:", "        if False:"),
 "no names-to-numbers inference": (p, "        elif static_argnames is not None and static_argnums is None:", "        elif False:"),
 "no negative static": (p, "frozenset(n + count if n < 0 else n for n in self.numbers)", "frozenset(self.numbers)"),
 "never settle": (p, "            if len(configs) == 1:", "            if False:"),
 "nested options not dropped": (nest, "        _registered[id(options)] = options", "        pass"),
 "python frame does not retry nested calls": (p, "                return plain(*args, **kwargs)", "                raise"),
 "no decorator factory": (p, "        return functools.partial(jit, db=db, **jit_kwargs)", "        raise TypeError('xtat.jit needs a function')"),
 "errors retried": (p, "        route = self._route(key, args, kwargs)\n        self._state.traced = None", "        try:\n            route = self._route(key, args, kwargs)\n        except Exception:\n            self._default.lower(*args, **kwargs); raise\n        self._state.traced = None"),
 "lower untuned": (p, "        return self._entry_for(args, kwargs).lower(*args, **kwargs)", "        return self._default.lower(*args, **kwargs)"),
 "no eval_shape": (p, "    def eval_shape(self", "    def _eval_shape(self"),
 "no clear_cache": (p, "    def clear_cache(self)", "    def _clear_cache(self)"),
 "no trace": (p, "    def trace(self", "    def _trace(self"),
 "jit keywords dropped": (p, "entry = jax.jit(self._wrapper(route), **self._jit_kwargs,", "entry = jax.jit(self._wrapper(route), **{k: v for k, v in self._jit_kwargs.items() if k.startswith('static')},"),
 "shardings dropped": (p, "entry = jax.jit(self._wrapper(route), **self._jit_kwargs,", "entry = jax.jit(self._wrapper(route), **{k: v for k, v in self._jit_kwargs.items() if 'shardings' not in k},"),
 "backend/device dropped": (p, "entry = jax.jit(self._wrapper(route), **self._jit_kwargs,", "entry = jax.jit(self._wrapper(route), **{k: v for k, v in self._jit_kwargs.items() if k not in ('backend', 'device')},"),
 "second trace of fn": (p, "        staged = self._staged.get(key)\n", "        staged = None\n"),
}
only = sys.argv[1:]
for name, (path, a, b) in M.items():
    if only and name not in only: continue
    text = path.read_text(); assert a in text, name
    path.write_text(text.replace(a, b, 1))
    try:
        r = subprocess.run([".venv/bin/python", "-m", "pytest", "-q", "-p", "no:randomly", "tests/test_jit_parity.py"], capture_output=True, text=True)
        failed = sorted(set(re.findall(r"FAILED tests/test_jit_parity.py::(\S+)", r.stdout)))
        print(f"{name}: {len(failed)} failed: {', '.join(f.replace('test_xtat_jit_behaves_as_jax_jit','') for f in failed)}", flush=True)
    finally:
        p.write_text(orig); nest.write_text(norig)
