"""Mutation check of the vetting, import, key, roofline, preset and launch tests: each behaviour removed
in turn must fail its tests.

    .venv/bin/python tests/mutate_deploy.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

M = [Mutation(*m) for m in [
 ("backing trial", "src/xtat/store/vetting.py", "        if not any(status == TrialStatus.OK and trial_key == key for trial_key, status in trials):", "        if False:", "tests/test_apply.py tests/test_store.py"),
 ("numerics opt-in", "src/xtat/stages/codegen/__init__.py", "            elif decision.relaxes_numerics and value != decision.default and not numerics_opt_in:", "            elif False:", "tests/test_apply.py"),
 ("safe passes", "src/xtat/stages/passes.py", "if name not in SAFE or not isinstance(value, bool)]", "if False]", "tests/test_apply.py"),
 ("curated options", "src/xtat/stages/codegen/__init__.py", "            if decision is None:\n", "            if decision is None and False:\n", "tests/test_apply.py"),
 ("import fingerprint", "src/xtat/store/exchange.py", "        if fingerprint(workload[\"program\"], workload[\"env\"]) != workload[\"fingerprint\"]:", "        if False:", "tests/test_store.py"),
 ("import vetting", "src/xtat/store/exchange.py", "            if result[\"adopted\"]:\n                _vet_adopted", "            if False:\n                _vet_adopted", "tests/test_store.py"),
 ("local first", "src/xtat/store/rows.py", "key=lambda r: (not r.imported, r.created_at, r.id)", "key=lambda r: r.id", "tests/test_store.py"),
 ("run settings exported", "src/xtat/store/sql.py", "\"run_settings\": self.run_settings(r.run_id)}", "\"run_settings\": None}", "tests/test_store.py"),
 ("own row excluded", "src/xtat/store/sql.py", "TrialStatus.DUPLICATE.value]), t.id != asking_id)", "TrialStatus.DUPLICATE.value]), t.id != -1)", "tests/test_store.py"),
 ("machine in key", "src/xtat/capture/workload.py", "        env.update(_cpu_identity())", "        pass", "tests/test_apply.py"),
 ("roof check", "src/xtat/bench/roofline.py", "    if max(placement.default_fraction, placement.tuned_fraction) > 1.0:", "    if False:", "tests/test_bench.py"),
 ("loops left out", "src/xtat/bench/roofline.py", "    if loops:", "    if False:", "tests/test_bench.py"),
 ("export error", "src/xtat/tuning/session.py", "        except Exception as exc:  # e.g. a knob", "        except ZeroDivisionError as exc:  # e.g. a knob", "tests/test_tune.py -k exported"),
 ("preset options", "src/xtat/apply/preset.py", "        \"compiler_options\": {e.name: e.compile_options for e in entries},", "        \"compiler_options\": {e.name: {} for e in entries},", "tests/test_preset.py"),
 ("run affinity", "src/xtat/core/candidate.py", "            os.sched_setaffinity(0, affinity)", "            pass", "tests/test_launch.py"),
]]

sys.exit(check(M))
