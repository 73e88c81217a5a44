"""The command line, in real subprocesses: contract, bad input, kill and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tiny import tiny_target

XTAT = [sys.executable, "-m", "xtat.cli.app"]
OPTIONS = "xla_cpu_opt_preset,xla_backend_optimization_level,xla_cpu_prefer_vector_width,xla_cpu_use_xnnpack"


def run(*args, check=True, timeout=300):
    result = subprocess.run([*XTAT, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


PROGRESS_AND_NOTES = ("note:", "tuning ", "wrote ", "next:", "checking ", "choosing ", "timing ", "report:",
                      "xtat run:")


def assert_only_progress_and_notes(stderr: str) -> None:
    """stderr holds the progress bar and notes (each line opens with its word), never a result."""
    for line in stderr.splitlines():
        assert not line.strip() or line.lstrip().startswith(PROGRESS_AND_NOTES), line


def _trials(db):
    with sqlite3.connect(db) as con:
        return con.execute("SELECT id, config_key, status, median_s, exe_hash FROM trials ORDER BY id").fetchall()


@pytest.mark.parametrize("target, message", [
    ("no_colon", "must look like"),
    ("no.such.module:thing", "does not import"),
    (tiny_target("missing"), "has no attribute"),
    (tiny_target("not_a_workload"), "not a workload"),
    ("missing/file.py:w", "does not exist"),
])
def test_bad_target_is_a_clear_error_and_writes_nothing(db, target, message):
    result = run("tune", target, "--db", db, check=False)
    assert result.returncode == 2
    assert message in result.stderr
    assert not db.exists()


def test_bad_database_is_refused_unchanged(tmp_path):
    db = tmp_path / "x.db"
    db.write_text("not a database")
    result = run("tune", tiny_target("tiny_mlp"), "--db", db, "--budget", "2", check=False)
    assert result.returncode == 2 and "not an SQLite database" in result.stderr
    assert db.read_text() == "not a database"


def test_tune_json_contract_show_trials_apply_export_import(db, tmp_path):
    result = run("tune", tiny_target("tiny_mlp"), "--db", db, "--budget", "3", "--options", OPTIONS,
                 "--stages", "codegen", "--confirm-time", "3", "--json")
    document = json.loads(result.stdout)  # with --json, stdout is the JSON object and nothing else
    assert_only_progress_and_notes(result.stderr)
    for key in ("workload", "fingerprint", "default_ms", "best_ms", "speedup", "speedup_ci", "adopted", "trials",
                "best_config"):
        assert key in document
    assert document["workload"] == "tiny_mlp" and sum(document["trials"].values()) == 3
    assert "tiny_mlp" in run("show", "--db", db).stdout
    trials = json.loads(run("trials", "tiny_mlp", "--db", db, "--json").stdout)
    assert len(trials) == 3
    applied = json.loads(run("apply", "tiny_mlp", "--db", db, "--print").stdout)
    assert applied["adopted"] == document["adopted"]
    assert applied["compile_options"] == document["best_config"].get("codegen", {})
    export = tmp_path / "export.json"
    run("export", export, "--db", db)
    other = tmp_path / "other.db"
    imported = run("import", export, "--db", other)
    assert imported.stdout.startswith("imported") and len(_trials(other)) == 3
    # Every command's result on stdout; on stderr nothing but progress and notes (`xtat tune >
    # result.txt` keeps the result). The tune again resumes: nothing new is measured.
    again = run("tune", tiny_target("tiny_mlp"), "--db", db, "--budget", "3", "--options", OPTIONS,
                "--stages", "codegen")
    assert "speedup" in again.stdout and "default" in again.stdout and "new 0" in again.stdout
    preset = run("export", "-", "--preset", "python", "--db", db) if document["adopted"] else None
    assert preset is None or "COMPILER_OPTIONS" in preset.stdout
    explained = run("explain", tiny_target("tiny_mlp"), "--db", db, "--rounds", "3") if document["adopted"] else None
    for shown in (again, run("show", "--db", db), run("trials", "tiny_mlp", "--db", db), preset, imported,
                  run("suite", "list"), explained):
        if shown is not None:
            assert shown.stdout.strip(), shown.args
            assert_only_progress_and_notes(shown.stderr)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = run("import", bad, "--db", other, check=False)
    assert result.returncode == 2 and "not valid JSON" in result.stderr
    assert len(_trials(other)) == 3


def test_what_the_users_code_prints_goes_to_stderr_and_stdout_keeps_the_result(db):
    result = run("tune", tiny_target("tiny_noisy_mlp"), "--db", db, "--budget", "1", "--json")
    assert json.loads(result.stdout)["workload"] == "tiny_noisy_mlp"  # the one JSON document, nothing else
    assert "noise from the user's code (print)" in result.stderr
    assert "noise from the user's code (fd 1)" in result.stderr


@pytest.mark.slow  # the default run kills and resumes the CLI in test_reliability.py (compile, SIGKILL)
def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(db):
    budget = 8
    args = [*XTAT, "tune", tiny_target("tiny_mlp"), "--db", str(db), "--budget", str(budget),
            "--options", OPTIONS, "--stages", "codegen"]
    tuner = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline:
        time.sleep(0.2)
        if db.exists():
            try:
                if sum(status != "running" for *_, status, _, _ in
                       [(r[0], r[1], r[2], r[3], r[4]) for r in _trials(db)]) >= 3:
                    break
            except sqlite3.OperationalError:
                continue
    os.kill(tuner.pid, signal.SIGKILL)
    tuner.wait()
    before = {row[1]: row for row in _trials(db) if row[2] != "running"}
    assert 3 <= len(before) < budget

    run(*args[len(XTAT):])
    after = _trials(db)
    keys = [row[1] for row in after]
    assert len(keys) == len(set(keys)) == budget
    assert all(row[2] != "running" for row in after)
    for row in after:  # finished rows are unchanged by the resumed run
        if row[1] in before:
            assert row == before[row[1]]
