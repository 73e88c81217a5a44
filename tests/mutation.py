"""The harness of the mutation checks (`tests/mutate_*.py`): each behaviour removed in turn must
fail the tests that cover it.

Each mutation is applied to a fresh `git archive HEAD` copy (the working tree is never changed),
and its tests run there with PYTHONPATH pointing at the copy (workers inherit it). Prints, per
mutation, the tests that failed; a mutation that fails none is a test gap. Not collected by pytest.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # the source file, from the repository root
    before: str  # text that must occur in it; its first occurrence is replaced
    after: str
    tests: str  # pytest arguments: the tests that must catch it


def check(mutations: list[Mutation], only: list[str] | None = None) -> int:
    """Run the mutations (those named in `only`, if given); returns how many no test caught."""
    only = sys.argv[1:] if only is None else only
    missed = 0
    for m in mutations:
        if only and m.name not in only:
            continue
        with tempfile.TemporaryDirectory() as copy:
            archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", copy], input=archive, check=True)
            target = pathlib.Path(copy) / m.path
            text = target.read_text()
            assert m.before in text, f"{m.name}: its text is no longer in {m.path}"
            target.write_text(text.replace(m.before, m.after, 1))
            result = subprocess.run([str(ROOT / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:randomly",
                                     *m.tests.split()], cwd=copy, capture_output=True, text=True,
                                    env={"PATH": "/usr/bin:/bin", "HOME": str(pathlib.Path.home()),
                                         "PYTHONPATH": str(pathlib.Path(copy) / "src"),
                                         **{k: v for k, v in os.environ.items() if k == "XTAT_TEST_POSTGRES_URL"}})
            failed = sorted(set(re.findall(r"FAILED (\S+)", result.stdout)))
            missed += not failed
            print(f"{m.name}: {len(failed)} failed: {', '.join(failed)[:300]}", flush=True)
    return missed
