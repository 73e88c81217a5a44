"""Tiles stage: each fusion XLA:GPU's autotuner gave a Triton tile config is a decision point.

Pinning. XLA autotunes every GEMM fusion at compile time, and its choice varies from one process
to the next when two configs time alike. Before anything is measured, the session compiles the
default once with XLA's autotuner dumping its results (`pin`); from then on every candidate's
process loads that file (`ProcessSetup.autotune_results`) instead of autotuning, so the default
and every candidate that leaves the tiles alone compile with the same tiles, and a measured
difference is the candidate's, not the autotuner's noise. A candidate that changes the autotuner
itself (its level, the exhaustive tiling search, cuBLAS fallback) autotunes afresh instead.

Discovery. The fusions of the pinned file (or, when earlier stages changed the program, of a file
dumped for that program, merged into the pin) with a Triton tile config become decision points,
`fusion-<hash of its HLO>/<parameter>`, one per tile parameter (block sizes, split-k, stages,
warps), whose values are those XLA's exhaustive tiling search enumerates for that dot. XLA's own
choice is the default, so the stage can only match or beat it. A candidate is the pinned file with
its tiles edited, which XLA loads instead of autotuning.

Only XLA:GPU has this autotuner; elsewhere the stage has no decisions and says so.
"""

from __future__ import annotations

from dataclasses import replace

from xtat.core.candidate import GPU_PLATFORMS, Candidate
from xtat.core.errors import UserError
from xtat.core.space import Config, Decision
from xtat.stages.base import Context, concretize
from xtat.stages.codegen.curated import REPLACES_AUTOTUNING
from xtat.stages.tiles import results

TILES = "tiles"


class TilesStage:
    name = TILES

    def __init__(self, earlier: tuple = ()) -> None:
        self._earlier = list(earlier)
        self.pinned = ""  # the run's autotune results (XLA's own choices), in its format (results.FORMATS)
        self._notes: list[str] = []

    def notes(self) -> list[str]:
        return list(self._notes)

    def pin(self, context: Context) -> None:
        """Fix XLA's autotuning for the run: dump its results for the default program once."""
        if context.platform not in GPU_PLATFORMS:
            return
        try:
            results.parse("")  # this jaxlib's schema of the file, before anything relies on it
        except RuntimeError as exc:
            self._notes.append(f"tiles: left to XLA's autotuner, unpinned: {exc}")
            return
        self.pinned = context.autotune_results(concretize(self._earlier, {}))
        if self.pinned:
            results.parse(self.pinned)  # what XLA wrote must be what its schema says

    def pin_to(self, text: str) -> None:
        """Apply a recorded run's results (an adopted result's file, vetted) instead of dumping anew."""
        if text:
            results.parse(text)
        self.pinned = text

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        if context.platform not in GPU_PLATFORMS:  # no autotuner: nothing to decide, nothing worth a note
            return []
        if not self.pinned and self._notes:  # the pin could not be taken; its note says why
            return []
        self._notes = []
        text = self.pinned
        if any(frozen.get(stage.name) for stage in self._earlier):  # another program: dump its own results
            text = context.autotune_results(concretize(self._earlier, frozen))
            self.pinned = results.merged(self.pinned, text)
        if not text:
            self._notes.append("tiles: XLA's autotuner wrote no results for this program (no GEMM fusions?)")
            return []
        found = results.contents(text)
        others = {kind: count for kind, count in found.kinds.items() if kind != "triton"}
        if others:
            self._notes.append(f"tiles: {len(found.tiles)} fusion(s) with Triton tiles; left to XLA: "
                               + ", ".join(f"{count} {kind}" for kind, count in sorted(others.items())))
        decisions = []
        for point in found.tiles:
            for parameter in point.chosen:
                values = point.values(parameter)
                if len(values) > 1:
                    decisions.append(Decision(self.name, results.decision_id(point.id, parameter), values,
                                              point.chosen[parameter]))
        return decisions

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        if REPLACES_AUTOTUNING & set(candidate.compile_options):
            # XLA autotunes afresh under these (another level, the exhaustive search): nothing pinned
            # applies, and tiles found under the default autotuning have no say.
            return candidate
        if not self.pinned:
            if values:
                raise UserError(f"tile decisions {sorted(values)} need the autotune results they were found in; "
                                "none are pinned in this process")
            return candidate
        try:
            text = results.with_tiles(self.pinned, values) if values else self.pinned
        except results.ResultsError as exc:
            raise UserError(f"tiles: {exc}") from None
        return replace(candidate, process=replace(candidate.process, autotune_results=text))

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        """A tile parameter of a fusion with one of XLA's own values; tiles only where XLA autotunes them.
        (Whether the fusion is in the record's results file is checked when the file is applied.)"""
        found = []
        for decision, value in values.items():
            try:
                _, parameter = results.split_decision_id(decision)
            except results.ResultsError as exc:
                found.append(f"tiles: {exc}")
                continue
            if platform not in GPU_PLATFORMS:
                found.append(f"tiles: {decision} is a GPU tile config; this record is for {platform}")
            elif isinstance(value, bool) or not isinstance(value, int) or value not in results.PARAMETERS[parameter]:
                found.append(f"tiles: {decision}={value!r} is not one of XLA's values "
                             f"{list(results.PARAMETERS[parameter])}")
        return found


def pin_autotuning(stages: list, context: Context) -> None:
    """Pin XLA's autotuning for a run (`TilesStage.pin`); nothing to pin off GPU."""
    for stage in stages:
        if isinstance(stage, TilesStage):
            stage.pin(context)
