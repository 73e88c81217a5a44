"""The stage interface and what a config becomes once every stage has applied it.

Stages run in a fixed order (runtime, program, passes, codegen). Each one
discovers its decision points on the program as the earlier stages'
decisions left it (`frozen`), and applies its part of a config to a
`Candidate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

from xtat.space.space import Config, Decision

STAGE_ORDER = ("runtime", "program", "passes", "codegen")


@dataclass(frozen=True)
class Candidate:
    """A config made concrete: program rewrites, compile options, worker environment."""

    program: dict[str, object] = field(default_factory=dict)  # program-stage decisions (rewrites)
    compile_options: dict[str, object] = field(default_factory=dict)
    env: tuple[tuple[str, str], ...] = ()  # process environment of the worker

    def with_options(self, **options: object) -> "Candidate":
        return replace(self, compile_options={**self.compile_options, **options})


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


class Stage(Protocol):
    name: str

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        """Decision points on the program produced by `frozen` (the earlier stages' chosen values)."""

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        """This stage's part of a config."""


def concretize(stages: "list[Stage]", config: Config) -> Candidate:
    candidate = Candidate()
    for stage in stages:
        candidate = stage.apply(config.get(stage.name, {}), candidate)
    return candidate
