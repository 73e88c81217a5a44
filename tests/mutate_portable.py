"""Mutation check of the nine tests issue 29 made portable (their configs build executables of their
own by construction, not by a codegen option's effect on one CPU): each behaviour removed in turn
must still fail them.

    .venv/bin/python tests/mutate_portable.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

RELIABILITY = "tests/test_reliability.py"
DYING = RELIABILITY + "::test_a_dying_or_failing_candidate_is_recorded_and_the_others_finish"
HANG = RELIABILITY + "::test_a_hang_is_killed_at_a_deadline_from_the_defaults_times_without_orphans"
M = [
    Mutation("a preset without the compile options", "src/xtat/apply/preset.py",
             "record.fingerprint, dict(candidate.compile_options),", "record.fingerprint, {},",
             "tests/test_preset.py -k compiles_what_xtat_jit_compiles"),
    Mutation("a crash recorded without its signal", "src/xtat/runner/pool.py",
             'f"worker killed by {name}. {tail}"', 'f"worker killed. {tail}"', DYING + "[compile-segfault-crash-SIGSEGV-True]"),
    Mutation("the worker kept after an out-of-memory", "src/xtat/runner/process.py",
             "        if isinstance(reply, p.Failed) and reply.status is TrialStatus.OOM:", "        if False:",
             DYING + "[run-oom-oom-MemoryError-True]"),
    Mutation("the compile deadline not from the default's compile", "src/xtat/runner/process.py",
             "self.compile_deadline_s = max(self.min_deadline_s,", "self.compile_deadline_s = max(self.startup_deadline_s,",
             HANG + "[compile-hang_hard]"),
    Mutation("the run deadline not from the default's run", "src/xtat/runner/process.py",
             "self.measure_deadline_s = max(self.min_deadline_s,", "self.measure_deadline_s = max(self.startup_deadline_s,",
             HANG + "[run-hang]"),
    Mutation("no racing", "src/xtat/tuning/measure.py",
             "    race = None if is_default else Race(", "    race = None if True else Race(",
             "tests/test_cost_model.py -k racing_stops"),
    Mutation("values beyond the element bound pass", "src/xtat/runner/verify.py",
             "    if s.beyond > max(allowed.outliers, fraction):", "    if False:",
             RELIABILITY + " -k subtly_wrong"),
    Mutation("the winner not re-verified", "src/xtat/tuning/adoption.py",
             "        if captured.verify_inputs is not None:\n            check = runner.verify(",
             "        if False:\n            check = runner.verify(",
             RELIABILITY + " -k subtly_wrong"),
]

sys.exit(check(M))
