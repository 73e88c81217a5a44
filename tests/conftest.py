import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS / "support"))  # tiny workloads, test doubles, helpers


# The test files measured longest on the 2-core machine (`pytest --durations=0`), longest first.
# The test processes take whole files in collection order (`--dist loadfile
# --no-loadscope-reorder`), so the long ones start first and the short ones fill in at the end
# (longest-processing-time-first): the processes finish close together. A file not
# listed runs after these; an outdated list costs balance, never coverage.
LONGEST_FIRST = ("test_profile", "test_launch", "test_loop", "test_reliability", "test_scale", "test_cli",
                 "test_confirmation", "test_suite_routing_science", "test_jit_parity", "test_preset", "test_gallery",
                 "test_sharding", "test_strategies", "test_stages", "test_store", "test_suite_standard",
                 "test_program_stage", "test_cost_model", "test_real_code", "test_tune")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: a file's tests keep their order


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "xtat.db"


# The fault-injection hooks work only under the test switch (xtat.core.test_hooks). Set for the whole
# test process, module-scoped fixtures included; workers and CLI subprocesses inherit it.
os.environ["XTAT_TEST_HOOKS"] = "1"


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch):
    monkeypatch.delenv("XTAT_FAULT", raising=False)




# -- stores: every store test runs on SQLite and on PostgreSQL ---------------------------------

POSTGRES_ENV = "XTAT_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The PostgreSQL server that ./scripts/test starts (scripts/postgres). Without it the tests that
    need it fail: they are not skipped."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.fail(f"{POSTGRES_ENV} is not set: run the tests with ./scripts/test, which starts PostgreSQL "
                    f"(or export {POSTGRES_ENV}=\"$(./scripts/postgres)\")")
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.Error as exc:
        pytest.fail(f"cannot reach the test PostgreSQL server at {url}: {exc}")
    return url


@pytest.fixture
def postgres_database(postgres_server):
    """Makes fresh, empty PostgreSQL databases (dropped after the test); each call returns a URL."""
    import uuid

    import psycopg

    made: list[str] = []

    def make() -> str:
        name = f"xtat_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_server, autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return postgres_server.rsplit("/", 1)[0] + "/" + name

    yield make
    with psycopg.connect(postgres_server, autocommit=True) as con:
        for name in made:
            # End the test's own leftover sessions (the role may end its own), then drop. Not `WITH
            # (FORCE)`: that also tries to end an autovacuum worker the server may have started in the
            # fresh database, which a role that is not a superuser may not end, and fails; a plain DROP
            # stops such a worker itself and waits for it.
            con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()", (name,))
            con.execute(f'DROP DATABASE IF EXISTS "{name}"')


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request, tmp_path):
    """Makes fresh store locations of the backend under test: SQLite files, or PostgreSQL databases."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_database")
    counter = iter(range(1_000))
    return lambda: tmp_path / f"store-{next(counter)}.db"
