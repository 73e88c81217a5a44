"""Mutation check of issue 17's tests (typed protocol, runner and store interfaces, test doubles,
schema 3, process setup): each behaviour removed in turn must fail its tests.

    .venv/bin/python tests/mutate_architecture.py [MUTATION ...]

The harness is tests/mutation.py. Not collected by pytest.
"""
import sys

from mutation import Mutation, check

LOOP = "tests/test_loop.py"
M = [
    Mutation("protocol version unchecked", "src/xtat/runner/protocol.py",
             '    if message.get("v") != PROTOCOL_VERSION:', "    if False:", "tests/test_protocol.py"),
    Mutation("no racing", "src/xtat/tuning/measure.py",
             "    race = None if is_default else Race(", "    race = None if True else Race(", LOOP),
    Mutation("no deduplication", "src/xtat/tuning/measure.py",
             "    same = store.measured_with_hash(", "    same = None and store.measured_with_hash(", LOOP),
    Mutation("impossible speedups trusted", "src/xtat/tuning/measure.py",
             "timed.median_s * settings.impossible_speedup < default.median_s:", "False:", LOOP),
    Mutation("an opened store ignored", "src/xtat/tuner.py",
             "if db is None or isinstance(db, (str, Path)) else db", "if True else db", LOOP + " -k sqlite"),
    Mutation("raced left in the metrics on upgrade", "src/xtat/store/schema.py",
             "\"UPDATE trials SET raced = 1 WHERE json_extract(metrics, '$.raced') = 1\"", '"SELECT 1"',
             "tests/test_store.py -k version_2"),
    Mutation("raced not a trial field", "src/xtat/store/records.py", '    Field("raced", (bool,)),\n', "",
             "tests/test_store.py"),
    Mutation("process setup leaves XLA_FLAGS", "src/xtat/core/candidate.py",
             "        os.environ.update(self.environment(dict(os.environ)))", "        pass",
             "tests/test_stages.py -k host_device"),
]

sys.exit(check(M))
