import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "xtat.db"


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch):
    monkeypatch.delenv("XTAT_FAULT", raising=False)


