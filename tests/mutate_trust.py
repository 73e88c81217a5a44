"""Mutation check of issue 15's verification, confirmation and hardening tests: each behaviour
removed in turn must fail its tests.

    .venv/bin/python tests/mutate_trust.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

M = [Mutation(*m) for m in [
    ("floor from max, not RMS", "src/xtat/runner/verify.py", "    bound = own + bounds.floor * rms\n",
     "    bound = own + bounds.floor * float(np.max(scale))\n", "tests/test_verify.py"),
    ("no spread rule", "src/xtat/runner/verify.py", "    if s.spread * s.size > max(1, math.floor(spread_allowed * s.size)):",
     "    if False:", "tests/test_verify.py"),
    ("no norm rule", "src/xtat/runner/verify.py", "    if s.error_rms > norm_allowed * s.want_rms + bounds.atol:", "    if False:",
     "tests/test_verify.py"),
    ("norm rule without atol", "src/xtat/runner/verify.py",
     "    if s.error_rms > norm_allowed * s.want_rms + bounds.atol:", "    if s.error_rms > norm_allowed * s.want_rms:",
     "tests/test_verify.py"),
    ("no outlier fraction", "src/xtat/runner/verify.py", "    fraction = math.floor(bounds.outliers * s.size)",
     "    fraction = 0", "tests/test_verify.py"),
    ("no calibration", "src/xtat/runner/verify.py", "        beyond = max(s.beyond for s in seen)", "        beyond = 0",
     "tests/test_verify.py"),
    ("calibration unbounded", "src/xtat/runner/verify.py",
     "            outliers=math.ceil(factor * beyond),", "            outliers=10**9,", "tests/test_verify.py"),
    ("hooks without switch", "src/xtat/test_hooks.py", 'if os.environ.get(SWITCH) == "1" else ""', 'if True else ""',
     "tests/test_reliability.py -k hooks"),
    ("database world-readable", "src/xtat/store/sql.py", "os.O_CREAT | os.O_WRONLY, 0o600", "os.O_CREAT | os.O_WRONLY, 0o644",
     "tests/test_reliability.py -k owner"),
    ("abandoned folders kept", "src/xtat/tuning/session.py", "            shutil.rmtree(owner.parent, ignore_errors=True)",
     "            pass", "tests/test_reliability.py -k killed_runs_folder"),
    ("inputs not checked", "src/xtat/runner/worker.py",
     "if name == input_set]\n        if all(", "if name == input_set]\n        if True or all(",
     "tests/test_reliability.py -k writes_into"),
    ("one interval for all looks", "src/xtat/tuning/confirmation.py", "        return 1.0 - self.alpha / self.max_looks",
     "        return 1.0 - self.alpha", "tests/test_confirmation.py -k tie"),
    ("no sequential looks", "src/xtat/tuning/confirmation.py",
     "        return (Verdict.INCONCLUSIVE if looks >= self.max_looks else None), estimate",
     "        return Verdict.INCONCLUSIVE, estimate", "tests/test_confirmation.py -k fifteen"),
    ("load ignored", "src/xtat/tuning/confirmation.py",
     "load_dependent=load.other_cores is not None and load.other_cores >= settings.load_threshold_cores",
     "load_dependent=False", "tests/test_confirmation.py -k load"),
    ("search figure kept", "src/xtat/tuning/adoption.py", "            finalist = replace(finalist, speedup=confirmed.speedup,",
     "            finalist = replace(finalist, search_speedup=confirmed.speedup,", "tests/test_confirmation.py -k confirmed_one"),
    ("incumbents in one process", "src/xtat/compare/remeasure.py",
     "            m = side_by_side(runner, make_stages(), {key: json.loads(key)}, settings).configs[key]",
     "            m = side_by_side(runner, make_stages(), {k: json.loads(k) for k in keys}, settings).configs[key]",
     "tests/test_compare.py -k own_process"),
    ("exited own processes counted as others", "src/xtat/runner/load.py",
     "sum(int(f) for f in fields[11:15])", "sum(int(f) for f in fields[11:13])",
     "tests/test_confirmation.py -k started_from_here"),
    ("own processes only by the pids named", "src/xtat/runner/load.py",
     "        self._tree_last, tree = _tree_s(self._root)", "        self._tree_last, tree = self._tree_start, set()",
     "tests/test_confirmation.py -k started_from_here"),
    ("import skips unreported", "src/xtat/store/sql.py",
     "                if recorded:\n                    skipped.append", "                if False:\n                    skipped.append",
     "tests/test_store.py"),
]]

sys.exit(check(M))
