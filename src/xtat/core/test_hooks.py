"""Test-only hooks (fault injection, a simulated full disk) are read from the environment only
when the test switch is also set, so that a stray variable in production changes nothing."""

from __future__ import annotations

import os

SWITCH = "XTAT_TEST_HOOKS"


def hook(name: str) -> str:
    """The value of test hook variable `name`, or "" unless XTAT_TEST_HOOKS=1 is set too."""
    return os.environ.get(name, "") if os.environ.get(SWITCH) == "1" else ""
