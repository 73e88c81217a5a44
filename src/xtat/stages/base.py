"""The stage interface and what a config becomes once every stage has applied it.

Stages run in the order of `stages.registry`. Each one discovers its
decision points on the program as the earlier stages' decisions left it
(`frozen`), and applies its part of a config to a `Candidate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from xtat.core.candidate import Candidate
from xtat.core.space import Config, Decision


@dataclass(frozen=True)
class Context:
    """What stages may consult while discovering: the workload and a way to probe a compile."""

    fn: Callable
    args: tuple
    kwargs: dict
    platform: str
    allow_numerics_change: bool
    options: tuple[str, ...] | None  # restriction of the codegen stage (--options)
    # Names of the HLO passes that changed the program under a candidate (compiled in a worker).
    passes_that_ran: Callable[[Candidate], list[str]]
    # XLA:GPU's autotune results for a candidate's program (compiled in a fresh worker); "" elsewhere.
    autotune_results: Callable[[Candidate], str]
    devices: int = 1  # the devices the tuner's process sees (the sharding stage runs on more than one)
    # Each flat input's dimension names (or None) and shape (`Capture.dims`), and whether the workload
    # declared them (else `batch` names the leading axis of its last argument's arrays).
    input_dims: tuple[tuple[tuple[str, ...] | None, tuple[int, ...]], ...] = ()
    dims_declared: bool = False
    # The intermediates the workload marks (`xtat.constrain`): names and shape each (`Capture.marks`).
    marks: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = ()


class Stage(Protocol):
    """One compiler stage's decisions. Constructed with the stages before it (`stages.registry`)."""

    name: str

    def __init__(self, earlier: tuple[Stage, ...]) -> None: ...

    def notes(self) -> list[str]:
        """What the run's report should say about this stage's last discovery (why it was left out)."""
        ...

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        """Decision points on the program produced by `frozen` (the earlier stages' chosen values)."""

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        """This stage's part of a config."""

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        """What in this stage's part of a stored config (untrusted input) it would not offer on
        `platform`; empty when it may be applied. Options that relax numerics need `numerics_opt_in`."""


def concretize(stages: Sequence[Stage], config: Config) -> Candidate:
    candidate = Candidate()
    for stage in stages:
        candidate = stage.apply(config.get(stage.name, {}), candidate)
    return candidate
