"""`xtat profile -- COMMAND`: run a script as it is and keep what its programs cost.

The command runs as a child with its own arguments, working directory, standard streams and exit
status; its environment puts xtat's `boot` folder first on PYTHONPATH, so every Python process of
it that imports jax records its programs (`recorder.py`, a folder per process). The command's own
process is the one profiled; other processes that ran jax programs are noted. Each program's
share is its calls' time over the command's wall time; a program with `HOT_SHARE` or more is kept
with its exported program and inputs, for `xtat tune --profile`.

A command that exits non-zero, or dies before its recorder writes, leaves a profile marked
incomplete, with what was recorded whole; `xtat tune --profile` refuses it.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xtat.apply.launch import boot_path
from xtat.capture.workload import Identity, Workload, environment_identity, fingerprint
from xtat.core.errors import UserError
from xtat.profile.records import ProgramsFile, check_ranges, read_programs
from xtat.store import open_store
from xtat.store.records import ProfiledProgram

HOT_SHARE = 0.05  # a program of less of the script's time cannot make it more than 5% faster
# The `xtat` command as its console script starts it (`xtat run`'s fast start included), for this Python.
XTAT_COMMAND = "from xtat.cli import main; main()"


@dataclass(frozen=True)
class Profile:
    """A profiled run as stored."""

    id: int
    name: str
    command: list[str]
    cwd: str
    complete: bool
    exit_code: int
    wall_s: float
    programs: list[ProfiledProgram]
    notes: list[str]

    @property
    def hot(self) -> list[ProfiledProgram]:
        return [p for p in self.programs if p.exported is not None]

    @property
    def functions(self) -> list[Function]:
        """The programs by the Python function they were traced from, largest share first."""
        grouped: dict[str, list[ProfiledProgram]] = {}
        for program in self.programs:
            grouped.setdefault(program.function or program.fingerprint, []).append(program)
        found = [Function(key, sorted(members, key=lambda p: -p.share)) for key, members in grouped.items()]
        return sorted(found, key=lambda f: -f.share)


@dataclass(frozen=True)
class Function:
    """One Python function's programs in a profile, one per signature (a smaller last batch, another
    sequence length), largest share first. Its signatures are tuned as one: the config is searched
    on the largest kept signature with the function's whole share, then checked on the others."""

    key: str
    programs: list[ProfiledProgram]

    @property
    def share(self) -> float:
        return sum(p.share for p in self.programs)

    @property
    def kept(self) -> list[ProfiledProgram]:
        """Its signatures kept for tuning, largest share first."""
        return [p for p in self.programs if p.exported is not None]


def profile(command: list[str], db: str | Path | None, name: str, hot: float = HOT_SHARE,
            keep_bytes: int | None = None) -> Profile:
    """Run `command` under the recorder and store its profile as `name`: the programs of functions
    with `hot` of the time or more are kept for tuning, each with its first call's inputs when they
    take at most `keep_bytes` (default: the recorder's `INPUT_LIMIT_BYTES`), else their ranges."""
    if not command:
        raise UserError("name the command to profile after `--`, e.g. xtat profile -- python train.py")
    if shutil.which(command[0]) is None and not Path(command[0]).exists():
        raise UserError(f"cannot start {command[0]!r}: no such program")
    with tempfile.TemporaryDirectory(prefix="xtat-profile-") as folder:
        env = {k: v for k, v in os.environ.items() if k != "XTAT_RUN_DB"}  # profiled under XLA's defaults
        env.update(PYTHONPATH=boot_path(env), XTAT_PROFILE_DIR=folder, XTAT_PROFILE_HOT=repr(hot))
        if keep_bytes is not None:
            env["XTAT_PROFILE_KEEP_BYTES"] = str(int(keep_bytes))
        started = time.perf_counter()
        exit_code, pid = _run(command, env)
        wall = time.perf_counter() - started
        return _store(Path(folder), pid, command, db, name, exit_code, wall)


def timed_run(argv: list[str], env: dict[str, str], what: str, cwd: str | None = None) -> float:
    """The wall time of one whole run of a command, output discarded; UserError naming `what` ran
    and how it ended when it fails."""
    started = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env=env, text=True, cwd=cwd)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        tail = " | ".join((done.stderr or "").strip().splitlines()[-3:])
        raise UserError(f"the command failed {what} (exit status {done.returncode}): {tail}")
    return wall


def _run(command: list[str], env: dict[str, str]) -> tuple[int, int]:
    """The command's exit status (128 + N for a signal N) and process id, with SIGTERM passed on to
    it; Ctrl-C reaches it from the terminal, as it would without xtat."""
    child = subprocess.Popen(command, env=env)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda sig, frame: child.send_signal(sig))
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return (128 - code if code < 0 else code), child.pid


def _store(folder: Path, pid: int, command: list[str], db: str | Path | None, name: str, exit_code: int,
           wall: float) -> Profile:
    notes: list[str] = []
    record: ProgramsFile | None = None
    processes = [p for p in folder.iterdir() if p.is_dir()]
    # The command's own process (a launcher's first Python process that imported jax otherwise).
    own = sorted((p for p in processes if (p / "programs.json").exists() or (p / "unsupported.txt").exists()),
                 key=lambda p: (p.name != str(pid), p.stat().st_ctime))
    if len(own) > 1:
        notes.append(f"{len(own) - 1} other process(es) of the command ran jax programs: not profiled")
    if own and (own[0] / "unsupported.txt").exists():
        notes.append((own[0] / "unsupported.txt").read_text().strip())
    elif own:
        record = read_programs(own[0] / "programs.json")
        notes.extend(record.notes)
    elif exit_code == 0:
        notes.append("the command ran no jax program")
    else:
        notes.append("the command ended before its record was written")
    programs = [] if record is None else [_program(own[0], seen, wall) for seen in record.programs]
    complete = exit_code == 0 and (record is not None or not processes)
    if exit_code != 0:
        notes.append(f"the command exited with status {exit_code}: the profile is incomplete")
    env = environment_identity()
    store = open_store(db)
    try:
        profile_id = store.add_profile(name, command, os.getcwd(), env, complete, exit_code, wall, notes, programs)
    finally:
        store.close()
    return Profile(profile_id, name, command, os.getcwd(), complete, exit_code, wall, programs, notes)


def _program(folder: Path, seen: Any, wall: float) -> ProfiledProgram:
    share = seen.run_s / wall if wall > 0 else 0.0
    exported = (folder / seen.exported).read_bytes() if seen.exported else None  # the recorder chose, by function
    inputs = (folder / seen.inputs).read_bytes() if exported is not None and seen.inputs else None
    note = seen.inputs_note or ("" if inputs is not None or exported is None else "inputs not kept: seeded inputs")
    return ProfiledProgram(seen.fingerprint, seen.program, seen.name, seen.avals, seen.calls, seen.run_s,
                           seen.compile_s, share, exported, inputs, note, seen.not_tunable, seen.function,
                           seen.ranges if exported is not None and inputs is None else None)


def latest(db: str | Path | None, name: str) -> Profile:
    """The newest profile of `name`; UserError when there is none."""
    store = open_store(db, read_only=True)
    try:
        record = store.latest_profile(name)
        if record is None:
            raise UserError(f"no profile named {name!r} in {store.where}: run `xtat profile --name {name} -- "
                            "python your_script.py` first")
        programs = store.profiled_programs(record.id)
    finally:
        store.close()
    return Profile(record.id, record.name, record.command, record.cwd, record.complete, record.exit_code,
                   record.wall_s, programs, record.notes)


def workload(profiled: ProfiledProgram, profile_name: str) -> Workload:
    """A hot program as a workload to tune: its exported program on its kept (or seeded) inputs,
    keyed as the program the script compiles, so `xtat run` finds what it adopts."""
    import jax

    if profiled.exported is None:
        raise UserError(f"{profiled.name}: {profiled.not_tunable or 'not kept by the profile'}")
    env = environment_identity()
    if fingerprint(profiled.program, env) != profiled.fingerprint:
        raise UserError(f"{profile_name}/{profiled.name} was profiled under another device, jax or XLA_FLAGS than "
                        "this process has: profile the script again here")
    try:
        exported = jax.export.deserialize(bytearray(profiled.exported))
    except Exception as exc:
        raise UserError(f"{profile_name}/{profiled.name}: its stored program does not load "
                        f"({type(exc).__name__}: {exc})") from None
    avals = list(exported.in_avals)
    if profiled.inputs is not None:
        args = _kept_inputs(profiled, avals, profile_name)
    else:
        ranges = profiled.ranges or [None] * len(avals)
        try:
            check_ranges(ranges)
            if len(ranges) != len(avals):
                raise ValueError(f"{len(ranges)} input ranges for {len(avals)} inputs")
        except (ValueError, TypeError, IndexError) as exc:
            raise UserError(f"{profile_name}/{profiled.name}: its recorded input ranges are malformed ({exc}): "
                            "profile the script again") from None
        rng = np.random.default_rng(0)
        args = [_seeded(rng, aval, found) for aval, found in zip(avals, ranges)]
    identity = Identity(program=profiled.program, fingerprint=profiled.fingerprint, env=env, avals=profiled.avals)
    return Workload(exported.call, tuple(args), name=f"{profile_name}/{profiled.name}", keyed_as=identity)


def _kept_inputs(profiled: ProfiledProgram, avals: list, profile_name: str) -> list[np.ndarray]:
    try:
        with np.load(io.BytesIO(profiled.inputs or b""), allow_pickle=False) as data:
            arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    except Exception as exc:
        raise UserError(f"{profile_name}/{profiled.name}: its kept inputs are unreadable ({exc})") from None
    found = [(tuple(a.shape), str(a.dtype)) for a in arrays]
    wanted = [(tuple(a.shape), str(a.dtype)) for a in avals]
    if found != wanted:
        raise UserError(f"{profile_name}/{profiled.name}: its kept inputs {found} do not match its program's {wanted}")
    return arrays


def _seeded(rng: np.random.Generator, aval: Any, found: tuple[float, float] | None) -> np.ndarray:
    """Inputs of the aval's shape and dtype when the real ones were not kept: uniform in the range
    the script's call had (integers too, so indices stay in range); without a range, floats
    standard normal and integers and booleans zero."""
    import jax.numpy as jnp

    dtype = np.dtype(aval.dtype)
    inexact = jnp.issubdtype(dtype, jnp.inexact)
    if found is None:
        return rng.standard_normal(aval.shape).astype(dtype) if inexact else np.zeros(aval.shape, dtype)
    low, high = found
    if inexact:
        return rng.uniform(low, high, aval.shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(math.ceil(low), math.floor(high), aval.shape, endpoint=True).astype(dtype)
    limits = np.iinfo(dtype)
    return rng.integers(max(math.ceil(low), limits.min), min(math.floor(high), limits.max), aval.shape,
                        dtype=dtype, endpoint=True)
