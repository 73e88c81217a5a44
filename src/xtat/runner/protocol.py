"""The worker protocol: one request record per operation and one reply record per outcome.

These records are all that crosses the pipe between the tuner and a worker, as JSON lines
(`encode`, `decode_request`, `decode_reply`). Decoding validates every field (pydantic), so a
reply that does not match its record is a protocol error, not a KeyError three calls later. A
request carries the protocol version; a worker of another version refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import TypeAdapter

from xtat.core.status import TrialStatus
from xtat.runner.timing import TimingPolicy
from xtat.runner.verify import Tolerance

PROTOCOL_VERSION = 2  # 2: Prepare, paired timing


class ProtocolError(Exception):
    """A message that is not what the protocol says: a bug on one side, never a trial's outcome."""


# ---------------------------------------------------------------- requests


@dataclass(frozen=True)
class LoadRun:
    """Load the run folder: inputs, references and the verification budget."""

    op: ClassVar[str] = "load"
    folder: str


@dataclass(frozen=True)
class Compile:
    """Build a program file with compile options (`lower().compile()`), kept under `id`."""

    op: ClassVar[str] = "compile"
    id: str
    program: str  # a file name in the run folder
    options: dict[str, Any] = field(default_factory=dict)
    is_default: bool = False
    layout: str = ""  # inputs placed on this layout's mesh (`Candidate.layout`)


@dataclass(frozen=True)
class Deploy:
    """Build as `xtat.jit` deploys (`jax.jit(program, compiler_options=...)`) and verify it. With
    `as_called`, `program` is a `Source` file: the user's function is called on the user's own
    argument tree, as the user's step calls it (`build.source_program.SourceProgram.called`)."""

    op: ClassVar[str] = "deploy"
    id: str
    program: str
    options: dict[str, Any]
    tolerance: Tolerance
    is_default: bool = False
    layout: str = ""
    as_called: bool = False


@dataclass(frozen=True)
class ReferenceOutputs:
    """Run the build `id` (the default) on every input set and keep its outputs as the reference."""

    op: ClassVar[str] = "reference_outputs"
    id: str
    calibrate: bool = True  # also calibrate the verification budget


@dataclass(frozen=True)
class Measure:
    """Verify the build `id`, then time it alone (the default: candidates are timed in pairs with it)."""

    op: ClassVar[str] = "measure"
    id: str
    tolerance: Tolerance
    timing: TimingPolicy
    is_default: bool = False


@dataclass(frozen=True)
class Prepare:
    """Verify the build `id` as `Measure` does, then calibrate it for `Sample` (the parent times it
    in pairs with the reference: `runner.timing.paired`)."""

    op: ClassVar[str] = "prepare"
    id: str
    tolerance: Tolerance
    timing: TimingPolicy


class InputSet(StrEnum):
    """The workload's input sets a worker holds: its own arguments, and `make_inputs(1)`'s."""

    MAIN = "main"
    VERIFY = "verify"


@dataclass(frozen=True)
class Verify:
    """Check the build's outputs on one input set."""

    op: ClassVar[str] = "verify"
    id: str
    input_set: InputSet
    tolerance: Tolerance


@dataclass(frozen=True)
class Calibrate:
    """Warm the build up and choose its inner repeats per sample."""

    op: ClassVar[str] = "calibrate"
    id: str
    timing: TimingPolicy


@dataclass(frozen=True)
class Sample:
    """One timing sample of `inner` calls."""

    op: ClassVar[str] = "sample"
    id: str
    inner: int


@dataclass(frozen=True)
class Release:
    """Forget these builds (the compile cache may keep their executables a while)."""

    op: ClassVar[str] = "release"
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Exit:
    op: ClassVar[str] = "exit"


Request = (LoadRun | Compile | Deploy | ReferenceOutputs | Measure | Prepare | Verify | Calibrate | Sample | Release
           | Exit)
REQUESTS: dict[str, type] = {kind.op: kind for kind in Request.__args__}


# ---------------------------------------------------------------- replies


@dataclass(frozen=True)
class Check:
    """Outputs compared with the reference (`runner.verify`)."""

    verified: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatch: str = ""  # the failed rules, in words
    mismatches: tuple[dict[str, Any], ...] = ()  # each failed rule: output, index, values, margin
    closest: dict[str, float] = field(default_factory=dict)  # how near each rule came to failing


@dataclass(frozen=True)
class Failed:
    """The operation failed; `status` is the trial's outcome, `check` set for a wrong result."""

    status: TrialStatus
    error: str
    check: Check | None = None
    trace: str | None = None  # a worker bug's traceback


@dataclass(frozen=True)
class Loaded:
    input_sets: tuple[InputSet, ...]
    has_reference: tuple[str, ...]


@dataclass(frozen=True)
class Compiled:
    compile_s: float  # the build's real compile time, also when it came from the cache
    exe_hash: str
    metrics: dict[str, Any]  # compile-time facts (model.features.compile_metrics)
    cached: bool  # no compile time was spent now


@dataclass(frozen=True)
class Deployed:
    compile_s: float  # first call included


@dataclass(frozen=True)
class Referenced:
    budget: dict[str, Any]  # runner.verify.Budget as JSON


@dataclass(frozen=True)
class Timed:
    samples: tuple[float, ...]
    inner: int
    median_s: float
    ci_s: tuple[float, float]
    measure_s: float  # wall time of verifying and timing
    raced: bool  # stopped early: slower than the incumbent
    check: Check
    reference: tuple[float, ...] = ()  # paired timing: the reference's sample beside each of `samples`


@dataclass(frozen=True)
class Verified:
    check: Check


@dataclass(frozen=True)
class Calibrated:
    inner: int


@dataclass(frozen=True)
class Prepared:
    inner: int
    check: Check


@dataclass(frozen=True)
class Sampled:
    seconds: float


@dataclass(frozen=True)
class Done:
    """An operation with nothing to report (release, exit)."""


Reply = (Failed | Loaded | Compiled | Deployed | Referenced | Timed | Verified | Calibrated | Prepared | Sampled
         | Done)
REPLIES: dict[str, type] = {kind.__name__: kind for kind in Reply.__args__}


# ---------------------------------------------------------------- the wire


_ADAPTERS: dict[type, TypeAdapter] = {}


def _adapter(kind: type) -> TypeAdapter:
    if kind not in _ADAPTERS:  # building one takes a millisecond or two: once per record type
        _ADAPTERS[kind] = TypeAdapter(kind)
    return _ADAPTERS[kind]


def encode(message: Any) -> str:
    """One JSON line for a request or a reply."""
    body = _adapter(type(message)).dump_python(message, mode="json")
    head = {"v": PROTOCOL_VERSION, "op": message.op} if type(message) in REQUESTS.values() else \
        {"reply": type(message).__name__}
    return json.dumps({**head, "body": body})


def decode_request(line: str) -> Request:
    message = _parse(line)
    if message.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {message.get('v')!r}, this worker speaks {PROTOCOL_VERSION}")
    return _validate(REQUESTS, message.get("op"), message.get("body"))


def decode_reply(line: str) -> Reply:
    message = _parse(line)
    return _validate(REPLIES, message.get("reply"), message.get("body"))


def _parse(line: str) -> dict:
    try:
        message = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"not a JSON line: {line[:200]!r}") from exc
    if not isinstance(message, dict):
        raise ProtocolError(f"not a protocol message: {line[:200]!r}")
    return message


def _validate(kinds: dict[str, type], name: Any, body: Any) -> Any:
    kind = kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ProtocolError(f"unknown message {name!r}")
    try:
        return _adapter(kind).validate_python(body or {})
    except ValueError as exc:  # pydantic's ValidationError
        raise ProtocolError(f"malformed {name}: {exc}") from exc
