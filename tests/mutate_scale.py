"""Mutation check of issue 18's tests (shared PostgreSQL study, claims and leases, the decision
lock, the host measuring lock, the Ray executor): each behaviour removed in turn must fail its tests.

    XTAT_TEST_POSTGRES_URL="$(./scripts/postgres)" .venv/bin/python tests/mutate_scale.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import os
import sys

from mutation import Mutation, check

if not os.environ.get("XTAT_TEST_POSTGRES_URL"):  # without it every test errors, and no mutation is caught
    sys.exit('set XTAT_TEST_POSTGRES_URL="$(./scripts/postgres)" first')

STORE, SCALE = "tests/test_store.py", "tests/test_scale.py"
M = [
    Mutation("claims and locks not serialized on PostgreSQL", "src/xtat/store/sql.py",
             '            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY[what]})',
             "            pass", STORE + " -k same_moment"),
    Mutation("a live lease ignored", "src/xtat/store/sql.py",
             "            if row.owner != owner and not expired:", "            if False:", STORE + " -k claim"),
    Mutation("a dead owner's claim kept", "src/xtat/store/sql.py",
             "    if host != socket.gethostname():\n        return False",
             "    if True:\n        return False", STORE + " -k dead"),
    Mutation("a lock taken from its holder", "src/xtat/store/sql.py",
             "            if row is not None and row.owner != owner and not _owner_is_dead(row.owner):",
             "            if False:", STORE + " -k lock"),
    Mutation("another tuner's decision not reused", "src/xtat/tuner.py",
             'latest.detail.get("basis") == basis or', "False or", SCALE + " -k two_tuners"),
    Mutation("a lost node not recorded", "src/xtat/tuning/measure.py", "        if lost:", "        if False:",
             SCALE + " -k ray"),
    Mutation("no retry after a lost node", "src/xtat/runner/ray.py",
             "            replacement = self.pool.survivor(self.actor)", "            replacement = None",
             SCALE + " -k ray"),
    Mutation("the host lock not taken", "src/xtat/runner/host_lock.py", "            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)",
             "            pass", SCALE + " -k measuring_lock"),
]

sys.exit(check(M))
