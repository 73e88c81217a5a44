"""The mutation checks: each behaviour removed in turn must fail the tests that cover it.

    XTAT_TEST_POSTGRES_URL="$(./scripts/postgres)" .venv/bin/python tests/mutations/run.py \
        [--topic TOPIC]... [--diff REV] [--list] [NAME ...]

The mutations are data, one TOML file per topic in this folder (`[[mutation]]`: `name`, `path`
of the source file from the repository root, `before`, text whose first occurrence is replaced
by `after`, and `tests`, the pytest arguments that must catch it). Selection: every mutation,
or those of the given topics, or (`--diff REV`) those whose source file differs from REV in the
working tree, or those named. Each mutation is applied to a fresh `git archive HEAD` copy (the
working tree is never changed) and its tests run there with PYTHONPATH pointing at the copy
(workers inherit it). Prints, per mutation, the tests that failed; a mutation that fails none is
a test gap, and the exit status counts them. Not collected by pytest; `tests/test_architecture.py`
checks that every mutation's text is still in its source file.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@dataclass(frozen=True)
class Mutation:
    topic: str
    name: str
    path: str  # the source file, from the repository root
    before: str  # text that must occur in it; its first occurrence is replaced
    after: str
    tests: str  # pytest arguments: the tests that must catch it


def load(folder: pathlib.Path = HERE) -> list[Mutation]:
    """Every mutation of every topic file, in file order."""
    found = []
    for file in sorted(folder.glob("*.toml")):
        for row in tomllib.loads(file.read_text())["mutation"]:
            found.append(Mutation(topic=file.stem, **row))
    return found


def changed_files(rev: str) -> set[str]:
    listed = subprocess.run(["git", "diff", "--name-only", rev], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def run(mutation: Mutation) -> list[str]:
    """The tests that failed with `mutation` applied to a copy of HEAD."""
    with tempfile.TemporaryDirectory() as copy:
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", copy], input=archive, check=True)
        target = pathlib.Path(copy) / mutation.path
        text = target.read_text()
        if mutation.before not in text:
            raise SystemExit(f"{mutation.topic}/{mutation.name}: its text is no longer in {mutation.path} at HEAD")
        target.write_text(text.replace(mutation.before, mutation.after, 1))
        result = subprocess.run([str(ROOT / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:randomly",
                                 *mutation.tests.split()], cwd=copy, capture_output=True, text=True,
                                env={"PATH": "/usr/bin:/bin", "HOME": str(pathlib.Path.home()),
                                     "PYTHONPATH": str(pathlib.Path(copy) / "src"),
                                     **{k: v for k, v in os.environ.items() if k == "XTAT_TEST_POSTGRES_URL"}})
        return sorted(set(re.findall(r"FAILED (\S+)", result.stdout)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="mutations by name (default: every selected one)")
    parser.add_argument("--topic", action="append", default=[], help="only this topic's file (repeatable)")
    parser.add_argument("--diff", metavar="REV", help="only mutations of source files that differ from REV")
    parser.add_argument("--list", action="store_true", help="list the selected mutations, run nothing")
    args = parser.parse_args()
    chosen = load()
    if args.topic:
        unknown = set(args.topic) - {m.topic for m in chosen}
        if unknown:
            parser.error(f"no topic {', '.join(sorted(unknown))}: the topics are the TOML files in {HERE}")
        chosen = [m for m in chosen if m.topic in args.topic]
    if args.diff:
        files = changed_files(args.diff)
        chosen = [m for m in chosen if m.path in files]
    if args.names:
        chosen = [m for m in chosen if m.name in args.names]
    if args.list:
        for m in chosen:
            print(f"{m.topic}/{m.name}: {m.path} -> {m.tests}")
        return 0
    if chosen and not os.environ.get("XTAT_TEST_POSTGRES_URL"):  # the store tests fail without it
        parser.error('set XTAT_TEST_POSTGRES_URL="$(./scripts/postgres)" first')
    missed = 0
    for m in chosen:
        failed = run(m)
        missed += not failed
        print(f"{m.topic}/{m.name}: {len(failed)} failed: {', '.join(failed)[:300]}", flush=True)
    print(f"{len(chosen)} mutation(s), {missed} caught by no test")
    return missed


if __name__ == "__main__":
    sys.exit(main())
