"""Mutation check of issue 15's verification, confirmation and hardening tests: each behaviour
removed in turn must fail its tests.

    .venv/bin/python tests/mutate_trust.py [MUTATION ...]

Each mutation is applied to a fresh `git archive HEAD` copy (the working tree is never
changed), and the tests that cover it run there with PYTHONPATH pointing at the copy
(workers inherit it). Prints the tests that failed. Not collected by pytest.
"""
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
M = [
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
    ("database world-readable", "src/xtat/store/sqlite.py", "os.O_CREAT | os.O_WRONLY, 0o600", "os.O_CREAT | os.O_WRONLY, 0o644",
     "tests/test_reliability.py -k owner"),
    ("abandoned folders kept", "src/xtat/tuning/session.py", "            shutil.rmtree(owner.parent, ignore_errors=True)",
     "            pass", "tests/test_reliability.py -k killed_runs_folder"),
    ("inputs not checked", "src/xtat/runner/worker.py", "        args, _ = self.inputs[input_set]\n        if all(",
     "        args, _ = self.inputs[input_set]\n        if True or all(", "tests/test_reliability.py -k writes_into"),
    ("one interval for all looks", "src/xtat/tuning/confirmation.py", "        return 1.0 - self.alpha / self.max_looks",
     "        return 1.0 - self.alpha", "tests/test_confirmation.py -k tie"),
    ("no sequential looks", "src/xtat/tuning/confirmation.py",
     "        return (Verdict.INCONCLUSIVE if looks >= self.max_looks else None), estimate",
     "        return Verdict.INCONCLUSIVE, estimate", "tests/test_confirmation.py -k fifteen"),
    ("load ignored", "src/xtat/tuning/confirmation.py",
     "load_dependent=load.other_cores is not None and load.other_cores >= settings.load_threshold_cores",
     "load_dependent=False", "tests/test_confirmation.py -k load"),
    ("search figure kept", "src/xtat/tuning/adoption.py", "            m.update(speedup=confirmed.speedup,",
     "            m.update(ignored=confirmed.speedup,", "tests/test_confirmation.py -k confirmed_one"),
    ("incumbents in one process", "src/xtat/compare/remeasure.py",
     "            m = side_by_side(runner, make_stages(), {key: json.loads(key)}, settings).configs[key]",
     "            m = side_by_side(runner, make_stages(), {k: json.loads(k) for k in keys}, settings).configs[key]",
     "tests/test_compare.py -k own_process"),
    ("import skips unreported", "src/xtat/store/sqlite.py",
     "                if recorded:\n                    skipped.append", "                if False:\n                    skipped.append",
     "tests/test_store.py"),
]

for name, path, a, b, test in [m for m in M if not sys.argv[1:] or m[0] in sys.argv[1:]]:
    with tempfile.TemporaryDirectory() as copy:
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", copy], input=archive, check=True)
        target = pathlib.Path(copy) / path
        text = target.read_text()
        assert a in text, name
        target.write_text(text.replace(a, b, 1))
        result = subprocess.run([str(ROOT / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:randomly",
                                 *test.split()], cwd=copy, capture_output=True, text=True,
                                env={"PATH": "/usr/bin:/bin", "HOME": str(pathlib.Path.home()),
                                     "PYTHONPATH": str(pathlib.Path(copy) / "src")})
        failed = sorted(set(re.findall(r"FAILED (\S+)", result.stdout)))
        print(f"{name}: {len(failed)} failed: {', '.join(failed)[:300]}", flush=True)
