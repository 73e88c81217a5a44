import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "xtat.db"


# The fault-injection hooks work only under the test switch (xtat.test_hooks). Set for the whole
# test process, module-scoped fixtures included; workers and CLI subprocesses inherit it.
os.environ["XTAT_TEST_HOOKS"] = "1"


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch):
    monkeypatch.delenv("XTAT_FAULT", raising=False)


