"""One config measured: compiled, deduplicated by executable, verified and timed (raced against
the incumbent) in a worker; always leaves a final status in the store."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from xtat.core.candidate import Candidate
from xtat.core.errors import UserError
from xtat.core.space import Config, config_id, config_key
from xtat.core.status import TrialStatus
from xtat.runner.base import DEFAULT_ID
from xtat.runner.protocol import Failed
from xtat.runner.timing import Race, median_ci, speedup_ci
from xtat.search.order import SETUP_STAGE
from xtat.stages.base import concretize
from xtat.store.records import Timing, Trial, TrialOutcome
from xtat.tuning.context import RunContext


class Abandoned(Exception):
    """A measurement whose run stopped before it finished (see `measure`)."""


@dataclass(frozen=True)
class Spent:
    """What measuring one config took here: compiling (0 when the worker had the build cached), and
    verifying and timing it (waiting for the measuring lock included)."""

    compile_s: float = 0.0
    timing_s: float = 0.0


def measure(run: RunContext, config: Config, candidate: Candidate, key: str, trial_id: int) -> tuple[Trial, Spent]:
    """Compile, deduplicate, verify and time one config, claimed as `trial_id`, in `run.runner`;
    leaves a final status, with the machine that measured it, unless the run was abandoned meanwhile
    (`RunContext.abandoned`: then the outcome, such as a worker that the run's end killed, is not the
    config's, and `Abandoned` is raised with nothing recorded)."""
    store, runner, workload_id, settings = run.store, run.runner, run.workload_id, run.settings
    started = time.perf_counter()

    def finish(outcome: TrialOutcome) -> Trial:
        if run.abandoned.is_set():
            raise Abandoned(f"the run stopped while trial {trial_id} was measured; it stays to be measured again")
        # spent_s is the wall time of this trial, with the machine that measured it and the machines
        # that died measuring it (each followed by a retry elsewhere).
        store.finish_trial(trial_id, replace(outcome, spent_s=time.perf_counter() - started, node=runner.node,
                                             lost_nodes=tuple(runner.losses())))
        finished = store.trial(workload_id, key)
        assert finished is not None  # this tuner holds its claim: the row is there
        return finished

    is_default = not config
    cid = DEFAULT_ID if is_default else config_id(config)
    try:
        built = runner.build(cid, candidate, is_default=is_default)
    except UserError as exc:  # the program stage could not rewrite this config
        return finish(TrialOutcome(TrialStatus.COMPILE_ERROR, error=str(exc))), Spent()
    if isinstance(built, Failed):
        return finish(TrialOutcome(built.status, error=built.error)), Spent()
    spent = Spent(0.0 if built.cached else built.compile_s)
    metrics = dict(built.metrics)
    same = store.measured_with_hash(workload_id, built.exe_hash, trial_id)
    if same is not None:
        runner.release(cid, candidate)
        return finish(TrialOutcome(
            TrialStatus.DUPLICATE, compile_s=built.compile_s, exe_hash=built.exe_hash, metrics=metrics,
            same_as=same.id, timing=recorded_timing(same),
            error=None if same.status == TrialStatus.OK else f"same executable as trial {same.id} ({same.status})",
            worker_s=built.compile_s, raced=same.raced)), spent
    race = None if is_default else Race(race_incumbent(store.trials(workload_id), config),
                                        settings.race_margin if settings.race_margin is not None else float("inf"),
                                        settings.race_min_samples)
    timed = runner.measure(cid, candidate, settings.tolerance, settings.timing, is_default=is_default, race=race)
    runner.release(cid, candidate)
    if isinstance(timed, Failed):
        check = timed.check
        return finish(TrialOutcome(timed.status, error=timed.error, compile_s=built.compile_s,
                                   exe_hash=built.exe_hash, metrics=metrics,
                                   max_abs_err=check.max_abs_err if check else None,
                                   max_rel_err=check.max_rel_err if check else None,
                                   # which rule failed, where and by how much
                                   mismatches=tuple(check.mismatches) if check else ())), spent
    spent = Spent(spent.compile_s, timed.measure_s)
    default = None if is_default else store.trial(workload_id, config_key({}))
    if default is not None and default.median_s and timed.median_s * settings.impossible_speedup < default.median_s:
        return finish(TrialOutcome(
            TrialStatus.WRONG_RESULT, compile_s=built.compile_s, exe_hash=built.exe_hash,
            error=f"impossibly fast: {default.median_s / timed.median_s:.0f}x faster than the default (limit "
                  f"{settings.impossible_speedup:g}x); work skipped or outputs stale?")), spent
    speedup = (1.0, 1.0, 1.0) if is_default else speedup_ci(list(timed.reference), list(timed.samples))
    timing = Timing(timed.median_s, timed.ci_s, tuple(timed.samples),
                    None if is_default else tuple(timed.reference), speedup)
    return finish(TrialOutcome(
        TrialStatus.OK, compile_s=built.compile_s, exe_hash=built.exe_hash, metrics=metrics, timing=timing,
        max_abs_err=timed.check.max_abs_err, max_rel_err=timed.check.max_rel_err,
        worker_s=built.compile_s + timed.measure_s, raced=timed.raced)), spent


def recorded_timing(trial: Trial) -> Timing | None:
    """A finished trial's figures, for a duplicate to reuse (its samples stay its twin's own); None
    when it has none."""
    if trial.median_s is None:
        return None
    ci = (trial.ci_low_s, trial.ci_high_s) if trial.ci_low_s is not None and trial.ci_high_s is not None else None
    speedup = ((trial.speedup, trial.speedup_low, trial.speedup_high)
               if trial.speedup is not None and trial.speedup_low is not None and trial.speedup_high is not None
               else None)
    return Timing(trial.median_s, ci, speedup=speedup)


def race_incumbent(trials: list[Trial], config: Config) -> float:
    """What a candidate (its config: `config`) races against: the best lower bound of the paired
    speedup over the default of a fully timed trial of its kind, with a process setup or without
    (`sets_up_process`; 1 while the default is the best). The lower bound, not the median: the best
    median of many noisy figures overstates its trial (the winner's curse), and a candidate raced
    out by a phantom is never timed in full again. Of its kind: a setup's figures share the error of
    its factor, measured across processes, and a flat program's figure need not rank a setup as the
    user's step does (`AS_CALLED_SHARE`), so neither kind races the other out; the shortlist gives
    each kind places of its own (`adoption.promising`). On Flax NNX, `cpu-parallel-task-assigner`
    off (the ceiling's config, 1.29x as called) was raced out after three pairs by one CPU's 1.89x
    flat (1.21x as called) and never reached the finalists."""
    kind = sets_up_process(config)
    return max((t.speedup_low if t.speedup_low is not None else t.speedup for t in trials
                if t.status == TrialStatus.OK and t.speedup is not None and not t.raced
                and sets_up_process(t.config) == kind), default=1.0)


def sets_up_process(config: Config) -> bool:
    """Whether the config holds a process setup (runtime decisions): it deploys with `xtat run`."""
    return bool(config.get(SETUP_STAGE))


def retime(run: RunContext, trial: Trial) -> tuple[Trial, Figure | None]:
    """A shortlisted trial timed again: a fresh block of `contender_pairs` pairs with the reference,
    timed on while its interval still holds 1 + tie_margin, up to `settle_s` (a win of a few percent
    reads either side of the margin in 15 pairs, and the block costs about a second on most
    programs: the GPT train step's `cse` off, 1.047x confirmed, was dropped on one such block).
    The shortlist is the fastest of many noisy figures, so each is biased up (the winner's curse,
    or a block of pairs that fell in one lucky episode); a block taken after the choice is not, and
    it alone ranks the finalists. The record keeps every pair: the block is added to the trial's.
    Returns the trial as recorded now and the fresh block's figure: None when it was not timed
    (recorded without pairs, or its rebuild failed: the finalists' re-measurement records that),
    or when it now fails its check (demoted: it may never be chosen)."""
    if trial.samples is None or trial.reference_samples is None:
        return trial, None
    store, runner, settings = run.store, run.runner, run.settings
    cid, candidate = config_id(trial.config), concretize(run.stages, trial.config)
    built = runner.build(cid, candidate)
    if isinstance(built, Failed):
        return trial, None
    timing = replace(settings.timing, samples=settings.timing.contender_pairs, settle_s=settings.settle_s)
    # The bar is the margin, and the race is never lost: the block decides only when to stop.
    bar = Race(incumbent=1.0 + settings.tie_margin, margin=math.inf)
    timed = runner.measure(cid, candidate, settings.tolerance, timing, race=bar)
    runner.release(cid, candidate)
    if isinstance(timed, Failed):
        if timed.status is TrialStatus.WRONG_RESULT:
            store.demote_trial(trial.id, f"failed its check when timed again: {timed.error}")
        return store.trial(run.workload_id, trial.config_key) or trial, None
    samples = [*trial.samples, *timed.samples]
    reference = [*trial.reference_samples, *timed.reference]
    median, low, high = median_ci(samples, seed=settings.seed)
    speedup, s_low, s_high = speedup_ci(reference, samples, seed=settings.seed)
    store.retime_trial(trial.id, Timing(median, (low, high), tuple(samples), tuple(reference),
                                        (speedup, s_low, s_high)), trial.search_pairs or len(trial.samples))
    fresh = Figure(*speedup_ci(list(timed.reference), list(timed.samples), seed=settings.seed))
    return store.trial(run.workload_id, trial.config_key) or trial, fresh


@dataclass(frozen=True)
class Figure:
    """A paired speedup over the default with its 95% interval."""

    speedup: float
    low: float
    high: float


def search_speedup(trial: Trial, default: Trial | None) -> float | None:
    """A measured trial's speedup over the default as the search measured it: paired when it was
    (`runner.timing.paired`), else (a store written before paired timing) the ratio of medians. Of a
    re-timed trial, its search's pairs only: a rerun of the run is told what the search was told, and
    asks what it asked (a re-timing's block moved the figure of near-ties enough to reorder them)."""
    pairs = trial.search_pairs
    if pairs and trial.samples and trial.reference_samples and pairs <= min(len(trial.samples),
                                                                             len(trial.reference_samples)):
        return speedup_ci(list(trial.reference_samples[:pairs]), list(trial.samples[:pairs]))[0]
    if trial.speedup is not None:
        return trial.speedup
    if trial.median_s and default is not None and default.median_s:
        return default.median_s / trial.median_s
    return None


# Where jax's host work on the user's argument tree takes at least this share of the default's call,
# finalists are measured as the user's step is called (`runner.base.Deployment.as_called`). The flat
# program the search times leaves that work out, and it is not a constant that divides out: Flax
# NNX's state (flattening it took 14% of a 0.37 ms call) reversed two finalists' order, one CPU 1.49x
# and `cpu-parallel-task-assigner` off 1.15x flat, 1.21x and 1.29x as called (docs/search.md).
AS_CALLED_SHARE = 0.05


def argument_host_s(args: tuple, kwargs: dict) -> float:
    """Seconds jax spends per call on the host taking the argument tree apart and building it again
    (flatten, unflatten: custom pytree nodes do it in Python): the least of five means of 50."""
    import jax

    tree = (args, kwargs)
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(50):
            leaves, structure = jax.tree.flatten(tree)
            jax.tree.unflatten(structure, leaves)
        best = min(best, (time.perf_counter() - start) / 50)
    return best
