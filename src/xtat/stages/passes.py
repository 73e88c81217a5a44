"""Passes stage: HLO optimisation passes that ran on this program and may be switched off.

Discovery compiles the program (as the earlier stages left it) in a worker
with a per-pass dump; XLA dumps a module only after a pass that changed it,
so the dump names the passes that actually did something. Of those, the
ones in SAFE are offered: optimisations that XLA does not need for
correctness (lowering and legalisation passes are never disabled).
Applied through `xla_disable_hlo_passes`.
"""

from __future__ import annotations

from xtat.core.candidate import Candidate
from xtat.core.space import Config, Decision
from xtat.stages.base import Context, concretize

CSE_BARRIER_EXPANDER = "cse_barrier_expander"

SAFE = frozenset({
    "algsimp", "batch-dot-simplification", "constant_folding", "cpu-parallel-task-assigner", "cse",
    CSE_BARRIER_EXPANDER, "dot-library-rewriter", "dynamic-dimension-simplifier", "fusion", "gemv-rewriter",
    "reshape-mover", "simplify-fp-conversions", "topk-rewriter", "transpose-folding", "tree_reduction_rewriter",
    "while-loop-invariant-code-motion", "while-loop-simplifier",
})


def disabled_passes_option(values: dict[str, object]) -> str:
    return ",".join(sorted(name for name, disabled in values.items() if disabled))


class PassesStage:
    name = "passes"

    def __init__(self, earlier: tuple = ()) -> None:
        self._earlier = list(earlier)  # to build the program the frozen decisions produce

    def notes(self) -> list[str]:
        return []

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        candidate = concretize(self._earlier, frozen)
        ran = set(context.passes_that_ran(candidate))
        # A decision of an earlier stage may need a pass off to have any effect
        # (a fusion barrier and cse_barrier_expander on CPU): offer that pass too.
        needed = {id for d in earlier for stage, id, _ in d.requires if stage == self.name}
        names = sorted((ran & SAFE) | needed)
        return [Decision(self.name, name, (False, True), False) for name in names]

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        option = disabled_passes_option(values)
        return candidate.with_options(xla_disable_hlo_passes=option) if option else candidate

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        return [f"pass {name!r}={value!r} is not a pass the passes stage may switch off"
                for name, value in values.items() if name not in SAFE or not isinstance(value, bool)]
