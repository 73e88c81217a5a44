"""Adoption: the fastest finalists re-measured interleaved with the default in fresh workers,
re-verified on a second input set, and adopted only when the speedup's interval clears the
tie margin."""

from __future__ import annotations

from dataclasses import dataclass, replace

from xtat.core.candidate import Candidate
from xtat.core.space import Config, config_id, config_key
from xtat.core.status import TrialStatus
from xtat.runner.base import WorkerFailure
from xtat.runner.protocol import Failed
from xtat.search.order import SETUP_STAGE
from xtat.stages.base import concretize
from xtat.store.records import Trial
from xtat.tuning.confirmation import Confirmation, Verdict, confirm
from xtat.tuning.context import RunContext
from xtat.tuning.measure import AS_CALLED_SHARE, Figure, argument_host_s, retime, search_speedup, sets_up_process
from xtat.tuning.result import AdoptionOutcome, Finalist
from xtat.tuning.settings import TuneSettings
from xtat.tuning.side_by_side import SideBySide, side_by_side

# The search's figures lie within 10% of side by side for 4 finalists in 5 (issue 30's campaigns).
KIND_REACH = 1.10
Confirmed = tuple[Finalist, Candidate, AdoptionOutcome, str]  # a finalist confirmed, its build, verdict, message


@dataclass(frozen=True)
class Adoption:
    """What adoption decided, and on which figures."""

    default_ms: float  # the default's time as last measured (confirmed, side by side, or in the search)
    default_ci_ms: tuple[float, float]
    outcome: AdoptionOutcome
    message: str
    best: Finalist | None  # the finalist that went furthest (confirmed, or the fastest re-measured)
    finalists: tuple[Finalist, ...] = ()

    @property
    def adopted(self) -> bool:
        return self.outcome.adopted

    @property
    def best_ms(self) -> float:
        return self.best.median_s * 1e3 if self.best else self.default_ms

    @property
    def best_ci_ms(self) -> tuple[float, float]:
        return (self.best.ci_s[0] * 1e3, self.best.ci_s[1] * 1e3) if self.best else self.default_ci_ms

    @property
    def speedup(self) -> float:
        return self.best.speedup if self.best else 1.0

    @property
    def speedup_ci(self) -> tuple[float, float]:
        return self.best.speedup_ci if self.best else (1.0, 1.0)


def finalize(run: RunContext, as_called: bool | None = None) -> Adoption:
    """Time the shortlist again, re-measure the finalists interleaved with the default in fresh workers,
    confirm the fastest (and a rival of the other kind near it: `rival_of`); adopt or not. With
    `as_called`, the finalists are measured as the user's step is called (None: `called_as_user`)."""
    captured, store, runner, settings, stages = run.captured, run.store, run.runner, run.settings, list(run.stages)
    trials = store.trials(run.workload_id)
    default = next((t for t in trials if not t.config and t.status == TrialStatus.OK), None)
    assert default is not None and default.median_s is not None
    # Finalists: the fastest whose paired speedup's interval clears the tie margin's floor (1): a
    # tie or a slower config would only spend the confirmation's time. The shortlist, two more than
    # the finalists whose search figure is past the tie margin, is timed again (`retime`) until its
    # fresh figure is decided, and the finalists are chosen on those fresh figures alone. The
    # shortlist asks nothing of the search figure's interval: a win of a few percent has a short
    # block's interval reaching 1 as often as not. A raced trial (stopped once known slower than
    # the incumbent) may be shortlisted on its partial figure: its incumbent may have been a phantom.
    searched = [(t, Figure(speedup, t.speedup_low or speedup, t.speedup_high or speedup)) for t in trials
                if t.config and t.status == TrialStatus.OK and (speedup := search_speedup(t, default)) is not None]
    # In both, configs with a process setup take at most half the places (`promising`).
    shortlist = promising(searched, default, settings, settings.finalists + 2, sure=False)
    retimed = [(t, fresh) for t, fresh in (retime(run, t) for t, _ in shortlist) if fresh is not None]
    crashed: list[int] = []  # finalists' trials whose worker failed side by side (demoted)

    def chosen() -> list[Trial]:
        """The finalists and their parts, none that crashed its worker side by side: a demoted
        finalist's place goes to the shortlist's next, on the fresh figures as the others."""
        finalists = promising([(t, f) for t, f in retimed if t.id not in crashed], default, settings,
                              settings.finalists)
        return [t for t in with_parts([t for t, _ in finalists], trials) if t.id not in crashed]

    candidates = chosen()
    default_ms = default.median_s * 1e3
    default_ci_ms = ((default.ci_low_s or default.median_s) * 1e3, (default.ci_high_s or default.median_s) * 1e3)

    def decided(outcome: AdoptionOutcome, message: str, best: Finalist | None = None,
                finalists: tuple[Finalist, ...] = ()) -> Adoption:
        if crashed:
            message += (f" (demoted as crashes: trial(s) {', '.join(map(str, crashed))}, whose worker failed "
                        f"when they ran side by side or were confirmed)")
        return Adoption(default_ms, default_ci_ms, outcome, message, best, finalists)

    if not candidates:
        message = ("no significant improvement: no candidate was faster than the default beyond the tie margin "
                   "in the search's paired timing: the default stays")
        return decided(AdoptionOutcome.NO_CANDIDATE, message)

    as_called = measured_as_called(run, default.median_s) if as_called is None else as_called
    # A worker that dies while the finalists are built or run side by side takes every build of its
    # process with it. A finalist ran in the search already, yet its executable may crash only some of
    # the time: the GPT train step's `algsimp` and `cse` off together segfaulted when run in 1 of 2 to 2
    # of 2 fresh workers, and took both of the campaign's runs at 5ee496e down with it. The build the
    # worker was running is demoted as a crash (never deployed, never chosen again), the shortlist's
    # next takes its place, and they are measured again in fresh workers; a failure that is no
    # finalist's own ends the re-measurement.
    while True:
        try:
            result = side_by_side(runner, stages, {str(t.id): t.config for t in candidates}, settings, as_called)
            break
        except WorkerFailure as failure:
            culprits = [t for t in candidates if failure.build is not None and config_id(t.config) == failure.build]
            if not culprits:
                message = (f"no significant improvement: finalist re-measurement failed ({failure.status}: "
                           f"{failure.error})")
                return decided(AdoptionOutcome.REMEASURE_FAILED, message)
            for culprit in culprits:
                store.demote_trial(culprit.id, f"its worker failed when it ran side by side: {failure.status}: "
                                   f"{failure.error}", failure.status)
                crashed.append(culprit.id)
            candidates = chosen()
            if not candidates:
                return decided(AdoptionOutcome.REMEASURE_FAILED,
                               "no significant improvement: every finalist failed its worker side by side")
    if result.default_failed:
        return decided(AdoptionOutcome.DEFAULT_FAILED, "no significant improvement: the default failed to rebuild")
    if result.default is None:
        return decided(AdoptionOutcome.REMEASURE_FAILED,
                       "no significant improvement: no finalist rebuilt for the re-measurement: the default stays")

    d = result.default
    default_ms, default_ci_ms = d.median_s * 1e3, (d.ci_s[0] * 1e3, d.ci_s[1] * 1e3)
    measured = [Finalist(t.id, t.config, f.median_s, f.ci_s, f.speedup, f.speedup_ci)
                for t in candidates if (f := result.configs[str(t.id)].figures) is not None]
    measured = [replace(f, gave_way_to=part.trial) if (part := outdone_by_part(f, measured, result, settings)) else f
                for f in measured]
    measured.sort(key=lambda f: -f.speedup)

    # The fastest finalist is confirmed, and its verdict decides: one confirmation per run, its error
    # rate the run's. Where it is adopted and a finalist of the other kind (with a process setup,
    # without) read within `KIND_REACH` of it side by side, that rival is confirmed too (`rival_of`),
    # and where both are confirmed faster, the two are confirmed head to head (`settle_kinds`).
    leader: Confirmed | None = None
    look_s = 0.0  # a look's wall time in the leader's confirmation, fresh processes' deploys included
    for index, finalist in enumerate(measured):
        if finalist.gave_way_to is not None or finalist.speedup <= 1.0 + settings.tie_margin:
            continue  # a part of it stands for it; or not faster, or a tie
        if leader is not None and (not rival_of(leader[0], finalist) or not room_for(run, look_s)):
            continue
        candidate = concretize(stages, finalist.config)
        if captured.verify_inputs is not None:
            check = runner.verify(config_id(finalist.config), candidate, settings.tolerance, settings.verify_repeats)
            measured[index] = finalist = replace(finalist, verified_on_second_inputs=not isinstance(check, Failed))
            if isinstance(check, Failed):
                reason = check.error if check.status is TrialStatus.WRONG_RESULT else f"{check.status}: {check.error}"
                store.demote_trial(finalist.trial, f"failed re-verification on make_inputs(1): {reason}", check.status)
                continue
        confirmed = confirm(runner, candidate, config_id(finalist.config), settings, as_called, until=run.deadline)
        if leader is None and confirmed.load is not None:  # its load window spans the whole confirmation
            look_s = confirmed.load.wall_s / max(confirmed.looks, 1)
        finalist = replace(finalist, search_speedup=finalist.speedup, search_speedup_ci=finalist.speedup_ci,
                           confirmation=confirmed)
        if confirmed.verdict is Verdict.FAILED and confirmed.failed_build == config_id(finalist.config):
            # Its own worker died (as side by side, above): demoted as a crash, and the next finalist is
            # confirmed in its place. Both of GPT's runs at b949c15 confirmed `algsimp` and `cse` off, which
            # segfaulted there, and kept the default, their other finalists (1.04x; 1.06x and 1.01x side
            # by side) never confirmed.
            store.demote_trial(finalist.trial, f"its worker failed while it was confirmed: {confirmed.error}",
                               confirmed.failure_status or TrialStatus.CRASH)
            crashed.append(finalist.trial)
            measured[index] = finalist
            continue
        if confirmed.verdict is not Verdict.FAILED:
            finalist = replace(finalist, speedup=confirmed.speedup, speedup_ci=confirmed.speedup_ci,
                               median_s=confirmed.candidate_s, ci_s=confirmed.candidate_ci_s)
        measured[index] = finalist
        outcome, message = judge(confirmed, settings, as_called)
        if leader is None:
            leader = (finalist, candidate, outcome, message)
            if not outcome.adopted:
                break
            continue
        if outcome.adopted:
            leader, settled = settle_kinds(run, as_called, leader, (finalist, candidate, outcome, message), look_s)
            measured = [settled if f.trial == settled.trial else f for f in measured]
        break
    if leader is not None:
        finalist, candidate, outcome, message = leader
        assert finalist.confirmation is not None
        if finalist.confirmation.verdict is not Verdict.FAILED:
            default_ms = finalist.confirmation.default_s * 1e3
            default_ci_ms = (finalist.confirmation.default_ci_s[0] * 1e3, finalist.confirmation.default_ci_s[1] * 1e3)
        if outcome.adopted:
            message += deployment_note(candidate)
        return decided(outcome, message, finalist, tuple(measured))
    demoted = sum(f.verified_on_second_inputs is False for f in measured)
    if demoted:
        outcome = AdoptionOutcome.DEMOTED
        message = f"no significant improvement: {demoted} faster finalist(s) failed re-verification and were demoted"
    else:
        outcome, message = AdoptionOutcome.NOT_FASTER, "no significant improvement"
    message += ": the default stays"
    best = next((f for f in measured if f.gave_way_to is None), None)
    return decided(outcome, message, best, tuple(measured))


def promising(figures: list[tuple[Trial, Figure]], default: Trial, settings: TuneSettings,
              count: int, sure: bool = True) -> list[tuple[Trial, Figure]]:
    """The `count` fastest configs by their figure, one per executable, each faster than the default
    beyond the tie margin, and if `sure`, with its interval's lower bound above 1.

    Configs that set up the process take at most half the places (rounded up) while configs that
    do not are left. They share the measurement of the setup's factor over a few pairs of
    processes, and its error: a lucky factor lifts them all (debug_print's one CPU with two host
    devices read 1.07x in the search and 1.00x side by side, and configs with a setup took every
    place of quick's shortlist from a 1.04x codegen win). A config without a setup is timed beside
    the default in one worker, and deploys without `xtat run`.

    And the fastest of each kind (with a setup, without) holds a place while its figure is within
    `KIND_REACH` of the fastest's: the two kinds are timed differently, so a gap that small between
    them is no ranking. The KV decoder's standard run gave its three places to configs with
    `cpu-parallel-task-assigner` off (search 1.31-1.36x, side by side 1.16-1.24x) and none to one CPU
    (1.28x in the search), which the ceiling's config holds."""
    ranked: list[tuple[Trial, Figure]] = []  # the eligible, fastest first, one per executable
    seen = {default.exe_hash}
    for t, figure in sorted(figures, key=lambda pair: -pair[1].speedup):
        if t.exe_hash in seen or figure.speedup <= 1.0 + settings.tie_margin or (sure and figure.low <= 1.0):
            continue
        seen.add(t.exe_hash)
        ranked.append((t, figure))
    open_to_setups = (count + 1) // 2
    chosen: list[tuple[Trial, Figure]] = []
    held: list[tuple[Trial, Figure]] = []  # configs with a setup past their places
    for t, figure in ranked:
        if len(chosen) == count:
            break
        if sets_up_process(t.config):
            if open_to_setups == 0:
                held.append((t, figure))
                continue
            open_to_setups -= 1
        chosen.append((t, figure))
    chosen = sorted([*chosen, *held[:count - len(chosen)]], key=lambda pair: -pair[1].speedup)
    for kind in (True, False):
        if count < 2 or len(chosen) < count or any(sets_up_process(t.config) is kind for t, _ in chosen):
            continue
        rival = next((pair for pair in ranked if sets_up_process(pair[0].config) is kind), None)
        if rival is not None and rival[1].speedup * KIND_REACH >= chosen[0][1].speedup:
            chosen[-1] = rival  # in place of the slowest of the other kind
    return sorted(chosen, key=lambda pair: -pair[1].speedup)


def rival_of(leader: Finalist, finalist: Finalist) -> bool:
    """Whether `finalist` is confirmed after `leader` (adopted on its confirmation): it is of the other
    kind (with a process setup, without) and read within `KIND_REACH` of the leader side by side.

    Side by side, a config with a setup is timed across a few pairs of processes and one without in
    the default's worker, so a gap that small between them is no ranking, and the leader's figure is
    the fastest of several noisy ones. Flax NNX's runs at 30d2fa9 read one CPU at 1.28x and 1.35x side
    by side, `cpu-parallel-task-assigner` off at 1.26x and 1.23x; one CPU was adopted, confirmed at
    1.11x and 1.21x, and delivered 0.88x and 0.91x of the pass off with one more codegen decision.
    Adopting the rival only when it too is confirmed faster keeps each adoption's error rate at most
    the confirmation's alpha."""
    assert leader.search_speedup is not None
    return (sets_up_process(finalist.config) is not sets_up_process(leader.config)
            and finalist.speedup * KIND_REACH >= leader.search_speedup)


def room_for(run: RunContext, look_s: float) -> bool:
    """Whether another confirmation has time for two looks of `look_s` before the run's limit (always,
    without one): one look rarely decides, and a confirmation cut short adopts nothing."""
    left = run.time_left()
    return left is None or left >= 2 * look_s


def settle_kinds(run: RunContext, as_called: bool, first: Confirmed, second: Confirmed,
                 look_s: float) -> tuple[Confirmed, Finalist]:
    """Of two finalists confirmed faster than the default, one with a process setup and one without,
    the one adopted, and the one with the setup holding its head-to-head confirmation against the other
    (`Finalist.head_to_head`).

    The config with the setup is adopted only where that confirmation finds it faster than the other
    beyond the tie margin. Their two speedups over the default are measured apart, each with its own
    error, and the larger of two noisy figures is the likelier to be high; the setup's factor over a
    few pairs of processes is the noisier of the two: on Flax NNX at 4482b5a, one CPU with a pass off
    and nine more decisions was confirmed at 1.313x, the pass off alone at 1.173x, and the first,
    adopted, delivered 0.939x of the second under `xtat run`. A config without a setup deploys through
    `xtat.jit` alone, with fewer decisions to carry, so a tie goes to it, and so does a test that ends
    inconclusive at its time cap (half `confirm_time_s`), or one the run's limit leaves no room for
    (`room_for`, two looks of `look_s`)."""
    setup, plain = (first, second) if sets_up_process(first[0].config) else (second, first)
    head: Confirmation | None = None
    if room_for(run, look_s):
        # Half a confirmation's time: a third confirmation took standard's runs past 5 minutes (GPT's
        # train step 322 s at 077dc87), and an inconclusive end costs no false adoption, only the setup.
        settings = replace(run.settings, confirm_time_s=run.settings.confirm_time_s / 2)
        head = confirm(run.runner, setup[1], config_id(setup[0].config), settings, as_called, baseline=plain[1],
                       until=run.deadline)
    settled = replace(setup[0], head_to_head=head)
    faster = head is not None and head.verdict is Verdict.FASTER
    winner, other = (setup, plain) if faster else (plain, setup)
    if head is None:
        figure = "not run: the run's time limit left no room for it"
    elif head.verdict is Verdict.FAILED:
        figure = f"failed: {head.error}"
    else:
        figure = f"{head.speedup:.3f}x [{head.speedup_ci[0]:.3f}, {head.speedup_ci[1]:.3f}], {head.verdict.value}"
    kind = "with" if other is setup else "without"
    message = (f"{winner[3]} (over the finalist {kind} a process setup, confirmed {other[0].speedup:.3f}x: "
               f"the one with the setup over the other, head to head, {figure})")
    finalist = settled if winner is setup else winner[0]
    return (finalist, winner[1], winner[2], message), settled


def without_setup(config: Config) -> Config:
    """The config without its process setup (the runtime stage's decisions)."""
    return {stage: values for stage, values in config.items() if stage != SETUP_STAGE and values}


def parts(config: Config) -> list[Config]:
    """A config that sets up the process and holds more, split in two: its setup alone and the rest
    alone. Empty for any other config."""
    rest = without_setup(config)
    if not sets_up_process(config) or not rest:
        return []
    return [{SETUP_STAGE: config[SETUP_STAGE]}, rest]


def with_parts(candidates: list[Trial], trials: list[Trial]) -> list[Trial]:
    """The finalists, and after them, for each that sets up the process and holds more, the
    measured trials of its two parts (`parts`) where the search timed them (and they are not
    finalists already), to be timed side by side with it. A win of one part may carry the other
    into the finalists: debug_print's one-CPU setup, 0.99x on its own, rode on a codegen win (1.04x
    alone) to a 1.066x confirmation and delivered 1.017x under `xtat run`; the Haiku transformer's
    one CPU (1.13x delivered alone) carried two passes and two fusion barriers off into a config
    that delivered 1.09x."""
    by_key = {config_key(t.config): t for t in trials if t.status == TrialStatus.OK and t.config}
    chosen, keys = list(candidates), {config_key(t.config) for t in candidates}
    for t in candidates:
        for key in (config_key(part) for part in parts(t.config)):
            if key in by_key and key not in keys:
                chosen.append(by_key[key])
                keys.add(key)
    return chosen


def outdone_by_part(finalist: Finalist, measured: list[Finalist], result: SideBySide,
                    settings: TuneSettings) -> Finalist | None:
    """The part of a finalist that sets up the process and holds more, where it reads no faster side
    by side than that part alone beyond the tie margin: then the part stands for it, with fewer
    decisions to carry (and, for the rest, deployable without `xtat run`). None otherwise.

    "Faster" is the finalist's speedup over the part, paired by round (`SideBySide.over`): its setup
    alone shares its worker, and the setup's factor over the pairs of processes cancels. Taken from
    their two speedups over the default, that factor widened the finalist's interval: BlackJAX's
    quick run at 30d2fa9 read one CPU with `xla_cpu_copy_insertion_use_region_analysis` at 1.427x
    side by side and one CPU alone at 1.271x, yet the pair gave way, and one CPU alone delivered
    0.912x [0.879, 0.945] of the pair.

    The median decides, not the interval's lower bound: the finalist is confirmed against the
    default afterwards either way, and what a part's decision rides on costs nothing when it is a
    tie; giving way costs the win when it is not. At b2ddf15 BlackJAX's quick run read the same pair
    1.378x side by side and one CPU alone 1.293x; the pair's interval over one CPU reached the
    margin, it gave way, and one CPU alone delivered 0.882x [0.859, 0.906] of the pair. The cases
    that gave the rule its reason read the config no faster than its part at all (debug_print's
    one CPU on a codegen win, the Haiku transformer's one CPU carrying passes off: "Timing in the
    search", docs/search.md)."""
    keys = {config_key(part) for part in parts(finalist.config)}
    for part in (f for f in measured if config_key(f.config) in keys):
        over = result.over(str(finalist.trial), str(part.trial), settings.seed)
        if over is None or over[0] <= 1.0 + settings.tie_margin:
            return part
    return None


def deployment_note(candidate: Candidate) -> str:
    """How to get an adopted win that xtat.jit alone cannot give: a process setup was confirmed
    in a process started with it, and a running process cannot take it on."""
    if not candidate.process:
        return ""
    return (f"; it needs its process started with {candidate.process.describe()}: deploy with "
            "`xtat run -- python your_script.py` (xtat.jit alone applies only the rest)")


def called_as_user(run: RunContext) -> bool:
    """`measured_as_called` of the run's recorded default (False while it has no time)."""
    default = run.store.trial(run.workload_id, config_key({}))
    if default is None or default.status != TrialStatus.OK or not default.median_s:
        return False
    return measured_as_called(run, default.median_s)


def measured_as_called(run: RunContext, default_s: float) -> bool:
    """Whether the finalists are measured as the user's step is called: where the runner can import
    the user's function and jax's host work on its argument tree is `AS_CALLED_SHARE` or more of the
    default's call (`argument_host_s`)."""
    if not run.runner.can_call_as_user():
        return False
    _, args, kwargs = run.captured.workload.bound()
    return argument_host_s(args, kwargs) >= AS_CALLED_SHARE * default_s


def judge(confirmed: Confirmation, settings: TuneSettings, as_called: bool = False) -> tuple[AdoptionOutcome, str]:
    """Adopt or not on the confirmation: the outcome, and the message that says why."""
    figure = f"{confirmed.speedup:.3f}x [{confirmed.speedup_ci[0]:.3f}, {confirmed.speedup_ci[1]:.3f}]"
    step = "of your step as called (its argument tree rebuilt) " if as_called else ""
    where = f"through jax.jit {step}in fresh processes, {confirmed.rounds} interleaved rounds"
    if confirmed.verdict is Verdict.FAILED:
        return (AdoptionOutcome.CONFIRMATION_FAILED,
                f"no significant improvement: confirmation failed ({confirmed.error}): the default stays")
    if confirmed.verdict is Verdict.FASTER:
        if confirmed.load_dependent and confirmed.load is not None:
            if not settings.adopt_under_load:
                return AdoptionOutcome.LOAD_DEPENDENT, (
                    f"not adopted: {figure} faster {where}, but load-dependent: {confirmed.load.describe()} "
                    "(--adopt-under-load adopts it): the default stays")
            return AdoptionOutcome.ADOPTED_UNDER_LOAD, (f"adopted under load: {figure} faster {where}; "
                                                        f"{confirmed.load.describe()}")
        return AdoptionOutcome.ADOPTED, f"adopted: {figure} faster than the default, confirmed {where}"
    if confirmed.verdict is Verdict.NOT_FASTER:
        if confirmed.speedup_ci[0] > 1.0:
            return AdoptionOutcome.TIE, (f"a tie: faster, but by less than the tie margin: {figure} {where}: "
                                         "the default stays")
        return AdoptionOutcome.SLOWER, f"no significant improvement: {figure} {where}: the default stays"
    settle = ("the run's time limit ended it; an explicit --time or --budget lifts that limit"
              if confirmed.cut_by_run_limit else "a longer --confirm-time may settle it")
    threshold = 1 + settings.tie_margin
    # A confirmation with a process setup withholds its verdict until it has looked in as many fresh
    # pairs of processes as the setup's factor took: its interval may lie past the margin already.
    withheld = confirmed.looks < confirmed.looks_for_a_verdict and confirmed.speedup_ci[0] > threshold
    unsettled = (f"the interval lies above {threshold:g}, but a process setup's verdict needs "
                 f"{confirmed.looks_for_a_verdict} looks in fresh processes and {confirmed.looks} were taken"
                 if withheld else f"the interval straddles {threshold:g}")
    return AdoptionOutcome.INCONCLUSIVE, (
        f"no significant improvement: confirmation inconclusive, {figure} {where} ({unsettled}; {settle}): "
        "the default stays")
