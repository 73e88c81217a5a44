"""The layering of the roles (pyproject's [tool.importlinter]) holds, and a wrong-way import breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(source: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(source)}
    command = Path(sys.executable).parent / "lint-imports"  # import-linter, installed by the test extra
    return subprocess.run([str(command), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_roles_import_only_the_layers_below_them():
    result = lint_imports(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_store_that_imports_the_tuner_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "src" / "xtat", tmp_path / "xtat", ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "xtat" / "store" / "sql.py"
    store.write_text(store.read_text() + "\n\ndef _wrong_way():\n    from xtat.tuner import tune  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "xtat.store.sql -> xtat.tuner" in result.stdout, result.stdout


def test_every_mutation_still_finds_its_source_text():
    """The mutations (tests/mutations/*.toml) name source lines by their text: a refactoring that
    moves one must move the mutation with it, or the check silently tests nothing."""
    sys.path.insert(0, str(ROOT / "tests" / "mutations"))
    from run import load

    mutations = load()
    assert len({m.topic for m in mutations}) >= 10 and len(mutations) >= 100
    lost = [f"{m.topic}/{m.name} ({m.path})" for m in mutations
            if not (ROOT / m.path).is_file() or m.before not in (ROOT / m.path).read_text()]
    assert not lost, lost
    for m in mutations:
        files = [part.split("::")[0] for part in m.tests.split() if part.startswith("tests/")]
        assert files and all((ROOT / f).is_file() for f in files), f"{m.topic}/{m.name}: {m.tests}"
    names = [(m.topic, m.name) for m in mutations]
    assert len(names) == len(set(names))
