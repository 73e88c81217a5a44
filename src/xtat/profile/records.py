"""What the recorder inside a profiled script writes, as the parent reads it back (untrusted:
validated field by field, `read_programs`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from xtat.core.errors import UserError

_FILE_NAME = re.compile(r"^[0-9]{1,6}\.(export|npz)$")


@dataclass(frozen=True)
class ProgramSeen:
    """One program the script compiled: its keys, its calls and the time they took."""

    fingerprint: str  # `Identity.fingerprint`: what `xtat run` looks configs up by
    program: str  # `Identity.program`
    name: str  # jax's name of the program (the jitted function's)
    avals: list[dict]  # its inputs as `describe_avals` writes them
    calls: int
    run_s: float  # its calls' time, outputs ready, compiles left out
    compile_s: float
    exported: str = ""  # a file of the folder: its jax.export serialization (hot programs only)
    inputs: str = ""  # a file of the folder: its first call's inputs (.npz); "" for seeded inputs
    inputs_note: str = ""  # why there are no kept inputs
    not_tunable: str = ""  # why a hot program was not exported
    function: str = ""  # the Python function it was traced from ("" when jax kept none)
    ranges: list[tuple[float, float] | None] | None = None  # per input, for seeded inputs (`inputs` "")

    def __post_init__(self) -> None:
        for name in (self.exported, self.inputs):
            if name and not _FILE_NAME.match(name):
                raise ValueError(f"{name!r} is not a file name the recorder writes")
        if self.calls < 0 or self.run_s < 0 or self.compile_s < 0:
            raise ValueError("negative calls or seconds")
        check_ranges(self.ranges)


def check_ranges(ranges: list[tuple[float, float] | None] | None) -> None:
    """ValueError unless each range is finite and in order."""
    for found in ranges or ():
        if found is not None and not (math.isfinite(found[0]) and math.isfinite(found[1]) and found[0] <= found[1]):
            raise ValueError(f"input range {found} is not a finite [low, high]")


@dataclass(frozen=True)
class ProgramsFile:
    """`programs.json`: the whole of one profiled process."""

    wall_s: float  # the process's time from the recorder's start to its exit
    programs: list[ProgramSeen] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def model_dump_json(self) -> str:
        return _ADAPTER.dump_json(self).decode()


_ADAPTER = TypeAdapter(ProgramsFile)


def read_programs(path: Path) -> ProgramsFile:
    """A recorder's `programs.json`, validated; UserError naming what is wrong."""
    try:
        return _ADAPTER.validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        raise UserError(f"the profile's record {path.name} is unreadable or malformed: {exc}") from None
