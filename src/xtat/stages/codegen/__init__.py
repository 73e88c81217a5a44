"""Codegen stage: XLA's per-compile backend options, from the curated catalog (catalog.py: what the
installed XLA has; curated.py: which of them are searched; space.py: the typed decisions)."""

from __future__ import annotations

import warnings

from xtat.core.candidate import Candidate
from xtat.core.space import Config, Decision
from xtat.stages.base import Context
from xtat.stages.codegen.space import CODEGEN, codegen_space


class CodegenStage:
    name = CODEGEN

    def __init__(self, earlier: tuple = ()) -> None:
        pass

    def notes(self) -> list[str]:
        return []

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        return list(codegen_space(context.platform, context.allow_numerics_change, context.options).decisions)

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        return candidate.with_options(**values) if values else candidate

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        """A curated option of this platform with one of its curated values (or XLA's default), so
        never an output, file, path or dump option."""
        with warnings.catch_warnings():  # options this XLA lacks are a tuning note, not something to apply
            warnings.simplefilter("ignore")
            offered = {d.id: d for d in codegen_space(platform, allow_numerics_change=True).decisions}
        found = []
        for name, value in values.items():
            decision = offered.get(name)
            if decision is None:
                found.append(f"codegen option {name!r} is not one xtat searches on {platform}")
            elif not decision.admits(value):
                found.append(f"codegen option {name}={value!r} is not a value xtat offers ({list(decision.values)})")
            elif decision.relaxes_numerics and value != decision.default and not numerics_opt_in:
                found.append(f"{name}={value!r} relaxes numerics, and the run that recorded it did not opt in")
        return found
