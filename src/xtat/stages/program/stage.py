"""Program stage adapter: the jaxpr rewriter's decision points as a Stage."""

from __future__ import annotations

from dataclasses import replace

from xtat.core.candidate import Candidate
from xtat.core.errors import UserError
from xtat.core.space import Config, Decision
from xtat.stages.base import Context
from xtat.stages.passes import CSE_BARRIER_EXPANDER

BARRIER_PREFIX = "barrier@"


class ProgramStage:
    name = "program"

    def __init__(self, earlier: tuple = ()) -> None:
        self.unavailable: str | None = None  # why the program could not be rewritten, if so

    def notes(self) -> list[str]:
        return [f"{self.name} stage left out: {self.unavailable}"] if self.unavailable else []

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        from xtat.stages.program import discover

        try:
            decisions = discover(context.fn, context.args, context.kwargs)
        except UserError as exc:
            # Tuned without the program stage; the reason goes into the run's report.
            self.unavailable = str(exc)
            return []
        if context.platform == "cpu":
            # On CPU cse_barrier_expander strips optimization barriers: a barrier
            # decision is live only with that pass disabled.
            requires = (("passes", CSE_BARRIER_EXPANDER, True),)
            decisions = [replace(d, requires=requires) if d.id.startswith(BARRIER_PREFIX) else d
                         for d in decisions]
        return decisions

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        return replace(candidate, program={**candidate.program, **values}) if values else candidate

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        return []  # decision ids are checked against the program when it is rewritten (unknown ids refused)
