"""Codegen stage: XLA's per-compile backend options, from the curated catalog."""

from __future__ import annotations

from xtat.space.space import CODEGEN, Config, Decision, codegen_space
from xtat.stages.base import Candidate, Context


class CodegenStage:
    name = CODEGEN

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        return list(codegen_space(context.platform, context.allow_numerics_change, context.options).decisions)

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        return candidate.with_options(**values) if values else candidate
