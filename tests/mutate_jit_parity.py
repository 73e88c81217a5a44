"""Mutation check of the parity matrix: each behaviour of xtat.jit removed in turn must fail its cases.

    .venv/bin/python tests/mutate_jit_parity.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

TESTS = "tests/test_jit_parity.py"
M = [
 Mutation('no __get__', 'src/xtat/apply/jit.py',
          '    def __get__(self, instance',
          '    def _no_get(self, instance', TESTS),
 Mutation('no static inference', 'src/xtat/capture/arguments.py',
          '        if static_argnums is not None and static_argnames is None:',
          '        if False:', TESTS),
 Mutation('no names-to-numbers inference', 'src/xtat/capture/arguments.py',
          '        elif static_argnames is not None and static_argnums is None:',
          '        elif False:', TESTS),
 Mutation('no negative static', 'src/xtat/capture/arguments.py',
          'frozenset(n + count if n < 0 else n for n in self.numbers)',
          'frozenset(self.numbers)', TESTS),
 Mutation('never settle', 'src/xtat/apply/jit.py',
          '            if len(configs) == 1:',
          '            if False:', TESTS),
 Mutation('nested options not dropped', 'src/xtat/apply/nesting.py',
          '        _registered[id(options)] = options',
          '        pass', TESTS),
 Mutation('python frame does not retry nested calls', 'src/xtat/apply/jit.py',
          '                return plain(*args, **kwargs)',
          '                raise', TESTS),
 Mutation('no decorator factory', 'src/xtat/apply/jit.py',
          '        return functools.partial(jit, db=db, **jit_kwargs)',
          "        raise TypeError('xtat.jit needs a function')", TESTS),
 Mutation('errors retried', 'src/xtat/apply/jit.py',
          '        route = self._route(key, args, kwargs)\n        self._state.traced = None',
          '        try:\n            route = self._route(key, args, kwargs)\n        except Exception:\n            self._default.lower(*args, **kwargs); raise\n        self._state.traced = None', TESTS),
 Mutation('lower untuned', 'src/xtat/apply/jit.py',
          '        return self._entry_for(args, kwargs).lower(*args, **kwargs)',
          '        return self._default.lower(*args, **kwargs)', TESTS),
 Mutation('no eval_shape', 'src/xtat/apply/jit.py',
          '    def eval_shape(self',
          '    def _eval_shape(self', TESTS),
 Mutation('no clear_cache', 'src/xtat/apply/jit.py',
          '    def clear_cache(self)',
          '    def _clear_cache(self)', TESTS),
 Mutation('no trace', 'src/xtat/apply/jit.py',
          '    def trace(self',
          '    def _trace(self', TESTS),
 Mutation('jit keywords dropped', 'src/xtat/apply/jit.py',
          'entry = jax.jit(self._wrapper(route), **self._jit_kwargs,',
          "entry = jax.jit(self._wrapper(route), **{k: v for k, v in self._jit_kwargs.items() if k.startswith('static')},", TESTS),
 Mutation('shardings dropped', 'src/xtat/apply/jit.py',
          'entry = jax.jit(self._wrapper(route), **self._jit_kwargs,',
          "entry = jax.jit(self._wrapper(route), **{k: v for k, v in self._jit_kwargs.items() if 'shardings' not in k},", TESTS),
 Mutation('backend/device dropped', 'src/xtat/apply/jit.py',
          'entry = jax.jit(self._wrapper(route), **self._jit_kwargs,',
          "entry = jax.jit(self._wrapper(route), **{k: v for k, v in self._jit_kwargs.items() if k not in ('backend', 'device')},", TESTS),
 Mutation('second trace of fn', 'src/xtat/apply/jit.py',
          '        staged = self._staged.get(key)\n',
          '        staged = None\n', TESTS),
]

sys.exit(check(M))
