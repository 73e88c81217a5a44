"""Objectives beyond run time, and the Pareto front over them.

Adoption is always decided on run time (the interval rule in `tuning.adoption.finalize`);
compile time and peak memory are reported as trade-offs: the trials that no
other trial beats on every chosen objective at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from xtat.core.status import TrialStatus
from xtat.model.features import peak_bytes
from xtat.store.records import Trial


class Objective(StrEnum):
    """What a trial is judged on (lower is better); adoption is always on TIME."""

    TIME = "time"  # the run time
    COMPILE = "compile"  # the compile time
    MEMORY = "memory"  # the executable's peak memory


OBJECTIVES = tuple(Objective)


@dataclass(frozen=True)
class ParetoPoint:
    """A trial no other beats on every chosen objective at once."""

    trial: int
    config: dict
    median_ms: float
    compile_s: float | None
    peak_bytes: int | None
    raced: bool  # its time is a raced trial's partial figure


def objective_values(trial: Trial, objectives: Sequence[Objective | str]) -> tuple[float, ...] | None:
    """The trial's value for each objective (lower is better), None when one is unknown."""
    values = {Objective.TIME: trial.median_s, Objective.COMPILE: trial.compile_s,
              Objective.MEMORY: peak_bytes(trial.metrics)}
    chosen = [values[Objective(o)] for o in objectives]
    known = [float(v) for v in chosen if v is not None]
    return tuple(known) if len(known) == len(chosen) else None


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a is no worse than b on every objective and better on at least one."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_indices(points: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the non-dominated points, in input order; of equal points the first is kept."""
    front: list[int] = []
    for i, p in enumerate(points):
        if any(dominates(q, p) for q in points):
            continue
        if any(tuple(points[j]) == tuple(p) for j in front):
            continue
        front.append(i)
    return front


def pareto_front(trials: list[Trial], objectives: Sequence[Objective | str]) -> list[ParetoPoint]:
    """The non-dominated ok trials over `objectives`, fastest first."""
    timed = [(t, t.median_s) for t in trials if t.status == TrialStatus.OK and t.median_s is not None]
    scored = [(t, median_s, v) for t, median_s in timed for v in [objective_values(t, objectives)] if v is not None]
    front = [scored[i] for i in pareto_indices([v for _, _, v in scored])]
    return [ParetoPoint(t.id, t.config, median_s * 1e3, t.compile_s, peak_bytes(t.metrics), t.raced)
            for t, median_s, _ in sorted(front, key=lambda point: point[1])]
