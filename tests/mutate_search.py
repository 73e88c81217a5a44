"""Mutation check of issue 30's tests (paired timing in the search, the shortlist timed again, the search
order and its prior, effort levels): each behaviour removed in turn must fail its tests.

    .venv/bin/python tests/mutate_search.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

LOOP = "tests/test_loop.py"
STRATEGIES = "tests/test_strategies.py"
M = [
    Mutation("pairs always in one order", "src/xtat/runner/timing.py",
             "        if len(mine) % 2 == 0:", "        if True:", LOOP + " -k paired"),
    Mutation("contenders not timed longer", "src/xtat/runner/timing.py",
             '            if high < (race.incumbent if race is not None else float("inf")):', "            if True:",
             LOOP + " -k paired"),
    Mutation("a lost race timed on", "src/xtat/runner/timing.py",
             "        if race is not None and race.lost(", "        if False and race.lost(", LOOP + " -k paired"),
    Mutation("search figure from the raw median", "src/xtat/tuning/measure.py",
             "    if trial.speedup is not None:\n        return trial.speedup", "    if False:\n        pass",
             LOOP + " -k slows_down"),
    Mutation("per-op decisions not last", "src/xtat/search/order.py",
             "key=lambda d: (is_per_op(d), -counts.rate", "key=lambda d: (0, -counts.rate",
             STRATEGIES + " -k global_decisions"),
    Mutation("the prior not used", "src/xtat/search/order.py",
             "key=lambda d: (is_per_op(d), -counts.rate(kind(d.stage, d.id)))", "key=lambda d: is_per_op(d)",
             STRATEGIES + " -k global_decisions"),
    Mutation("a one-decision win not counted", "src/xtat/search/order.py",
             "                    won |= kinds", "                    pass", STRATEGIES + " -k global_decisions"),
    Mutation("a bad prior file accepted", "src/xtat/search/order.py",
             "        if not count(workloads):", "        if False:", STRATEGIES + " -k shipped_prior"),
    Mutation("a run's own trials reorder its search", "src/xtat/search/order.py",
             "            if workload.fingerprint == excluding:", "            if False:",
             LOOP + " -k rerun_measures_nothing_new"),
    Mutation("finalists chosen on the search's figures", "src/xtat/tuning/adoption.py",
             "promising(retimed, default, settings, settings.finalists)",
             "promising(searched, default, settings, settings.finalists)", LOOP + " -k phantom"),
    Mutation("a config failing when timed again kept", "src/xtat/tuning/measure.py",
             "        if timed.status is TrialStatus.WRONG_RESULT:\n            store.demote_trial(",
             "        if False:\n            store.demote_trial(", LOOP + " -k fails_its_check_when_timed_again"),
    Mutation("the race against the incumbent's median", "src/xtat/tuning/measure.py",
             "    return max((t.speedup_low if t.speedup_low is not None else t.speedup for t in trials",
             "    return max((t.speedup for t in trials", LOOP + " -k surely_worth"),
    Mutation("effort ignored", "src/xtat/tuning/settings.py",
             "        return cls(**{**preset, **overrides})", "        return cls(**overrides)",
             STRATEGIES + " -k effort"),
]

sys.exit(check(M))
