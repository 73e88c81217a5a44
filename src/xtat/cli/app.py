"""The `xtat` command line (typer + rich)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from xtat.cli.common import console, emit, names, out, results_only_on_stdout, user_errors
from xtat.cli.common import fail as _fail
from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.search import STRATEGIES
from xtat.stages.order import STAGE_ORDER

if TYPE_CHECKING:
    from xtat.capture.workload import Workload
    from xtat.store import Storage
    from xtat.store.records import WorkloadRecord
    from xtat.tuning.result import TrialEvent, TuneResult
    from xtat.tuning.settings import TuneSettings

app = typer.Typer(add_completion=False, no_args_is_help=False, help="xtat: autotune XLA for a JAX program.")


def _version(shown: bool) -> None:
    if shown:
        from xtat import __version__

        out.print(f"xtat {__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="Print xtat's version and exit.")) -> None:
    """xtat: autotune XLA for a JAX program."""

DEFAULT_TARGET = "xtat.suite.moe:moe_train_step"
DbOption = typer.Option(None, "--db", help="The store: an SQLite file or sqlite:/// URL, or a postgresql://"
                        "USER:PASSWORD@HOST/DB study shared by many tuners (default $XTAT_DB, else "
                        "~/.cache/xtat/xtat.db).")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.3f}"


@app.command()
@results_only_on_stdout
def tune(
    target: str | None = typer.Argument(None, help="package.module:attr or path/to/file.py:attr; "
                                           "default: the built-in MoE training step."),
    effort: str = typer.Option("standard", "--effort", help="quick (about a minute on a program with a 5 s "
                               "compile) | standard (at most 5 minutes in all, unless --time or --budget is given) | "
                               "exhaustive (1000 configs): a preset of --budget, --time, the finalists and "
                               "--confirm-time (docs/search.md)."),
    budget: int | None = typer.Option(None, help="Configs to consider, the default and resumed ones included "
                                      "(default: the effort's)."),
    time: float | None = typer.Option(None, "--time", help="Time budget of the search in seconds, resumed "
                                         "trials' time included (default: the effort's; 60 without TARGET)."),
    db: str | None = DbOption,
    seed: int = typer.Option(0, help="Seed of the search."),
    allow_numerics_change: bool = typer.Option(False, help="Also search options that relax numerics."),
    rtol: float | None = typer.Option(None, help="Relative tolerance (with --allow-numerics-change)."),
    atol: float | None = typer.Option(None, help="Absolute tolerance (with --allow-numerics-change)."),
    options: str | None = typer.Option(None, help="Comma-separated XLA options to search (default: all curated)."),
    stages: str = typer.Option(",".join(STAGE_ORDER), help="Stages whose decisions are searched."),
    formulation: str = typer.Option("joint", help="joint | staged | alternating."),
    strategy: str = typer.Option("sweep", help=f"Search strategy: {' | '.join(STRATEGIES)}."),
    objectives: str = typer.Option("time", help="time[,compile][,memory]: adoption stays on run time; with more, "
                                   "the Pareto front over them is shown."),
    learn_from: list[Path] | None = typer.Option(None, "--learn-from", help="Another store whose workloads' "
                                                     "trials the model strategy also learns from (repeatable)."),
    confirm_time: float | None = typer.Option(None, "--confirm-time", help="Most seconds the confirmation of a "
                                              "winner (deployed through jax.jit in fresh processes) may take adding "
                                              "rounds (default: the effort's)."),
    adopt_under_load: bool = typer.Option(False, help="Adopt a winner confirmed while other processes loaded "
                                          "the machine (by default it is reported as load-dependent)."),
    name: str | None = typer.Option(None, "--name", help="The workload's name in the store and reports "
                                       "(default: its own, or module:attr / file:attr)."),
    executor: str = typer.Option("local", "--executor", help="Where candidates are measured: local (worker "
                                 "processes here), ray (this machine's Ray cluster, or a new local one) or "
                                 "ray:ADDRESS (the Ray cluster at that address)."),
    workers: int = typer.Option(1, "--workers", help="Candidates measured at once (with --executor ray): "
                                "workers spread over the cluster, each holding a CPU (on GPU, its GPUs)."),
    compile_slots: int = typer.Option(1, "--compile-slots", help="Candidates compiled side by side on this "
                                      "machine, never while one is timed (e.g. one per core); with more than "
                                      "one a resumed run may ask other configs than the interrupted one."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object last."),
    profile: str | None = typer.Option(None, "--profile", help="Tune the hot programs of the newest profile of this "
                                       "name (`xtat profile`) instead of a TARGET, the --time budget split by "
                                       "their shares of the script's time."),
) -> None:
    """Tune a workload: search, verify, time, and adopt a significantly faster config."""
    from xtat.capture.targets import load_target
    from xtat.tuner import TuneSettings

    def settings_for(share: float, **given: object) -> TuneSettings:
        own_time = None if time is None else time * share  # a program's gain is capped by its share
        chosen = {field: value for field, value in (("budget", budget), ("time_s", own_time),
                                                    ("confirm_time_s", confirm_time)) if value is not None}
        return TuneSettings.at(
            effort, **{**chosen, **given}, seed=seed, allow_numerics_change=allow_numerics_change, rtol=rtol,
            atol=atol, options=names(options) if options else None, stages=names(searched), formulation=formulation,
            strategy=strategy, objectives=names(objectives), learn_from=tuple(map(str, learn_from or ())),
            adopt_under_load=adopt_under_load, executor=executor, workers=workers, compile_slots=compile_slots)

    try:
        if profile is not None:
            if target is not None:
                raise UserError("give a TARGET or --profile NAME, not both")
            functions, searched = _profiled(db, profile, stages)
        else:
            functions, searched = [(1.0, [(1.0, load_target(target or DEFAULT_TARGET, name))])], stages
        if target is None and profile is None and time is None:
            time = 60.0  # the built-in workload's quick start takes about a minute
        total = sum(share for share, _ in functions)
        plans = [(members, settings_for(share / total)) for share, members in functions]
    except UserError as exc:
        _fail(str(exc))
    for members, settings in plans:
        _tune_function(members, settings, settings_for(0.0, time_s=None), db, as_json)
    if profile is not None:
        _choose_for_script(db, profile, "runtime" in names(stages), as_json)


def _tune_function(members: list[tuple[float, Workload]], settings: TuneSettings, checks: TuneSettings,
                   db: str | None, as_json: bool) -> None:
    """A function's signatures (share, workload; largest first): the largest searched with `settings`,
    then each other one offered the largest's best configs (`tuning.signatures`) with `checks`."""
    from dataclasses import replace

    from xtat.tuning.signatures import SignatureGain, offered_configs, weighted_gain

    (share, largest), others = members[0], members[1:]
    result = _tune_one(largest, settings, db, as_json)
    if not others:
        return
    offered = offered_configs(result)
    if not offered:
        console.print(f"note: {len(others)} other signature(s) of {largest.display_name} keep XLA's defaults: "
                      "no passes or codegen options were adopted for its largest")
        return
    console.print(f"offering {len(offered)} config(s) of {largest.display_name} to its {len(others)} other "
                  "signature(s): each keeps the fastest of them that is confirmed on it, or XLA's defaults")
    gains = [SignatureGain(share, result.speedup)]
    for own_share, member in others:
        checked = _tune_one(member, replace(checks, budget=len(offered) + 1, first=offered), db, as_json)
        gains.append(SignatureGain(own_share, checked.speedup if checked.adopted else 1.0))
    console.print(f"{largest.display_name}: {weighted_gain(gains):.3f}x over its {len(members)} signatures, "
                  "weighted by their shares of the script's time")


SCRIPT_ROUNDS = 6  # whole-script runs each way: an exact 95% interval of the median ratio needs 6


def _choose_for_script(db: str | None, name: str, runtime: bool, as_json: bool) -> None:
    """Keep the programs' configs, and a runtime decision, only where the whole script under
    `xtat run` is faster than plain beyond noise (`profile.whole_script`)."""
    from xtat.core.candidate import available_cpus
    from xtat.profile.session import latest
    from xtat.profile.whole_script import choose

    found = latest(db, name)
    runtime = runtime and len(available_cpus()) >= 2
    console.print(f"timing the whole script plain and under xtat run{' with each runtime setup' if runtime else ''}, "
                  f"{SCRIPT_ROUNDS} alternating rounds: {' '.join(found.command)}"
                  f"{'' if found.cwd == os.getcwd() else f' (in {found.cwd})'}")
    with user_errors():
        tuned = [program.fingerprint for function in found.functions for program in function.kept]
        choice = choose(name, found.command, found.cwd, db, SCRIPT_ROUNDS, tuned, runtime)
    if as_json:  # stdout holds only JSON lines
        console.print(f"note: {choice.describe()}")
        emit(json.dumps({"script": name, **choice.to_json()}) + "\n")  # one compact line, like each program's
    else:
        out.print(choice.describe())


def _profiled(db: str | None, name: str, stages: str
              ) -> tuple[list[tuple[float, list[tuple[float, Workload]]]], str]:
    """The hot functions of a profile, each its share and its kept signatures as workloads (largest
    first), and the stages they are tuned in."""
    from xtat.profile.session import HOT_SHARE, latest, workload

    found = latest(db, name)
    if not found.complete:
        raise UserError(f"the newest profile {name!r} is incomplete ({'; '.join(found.notes)}): profile the script "
                        "again until it runs to the end")
    for program in found.programs:
        if program.share >= HOT_SHARE and program.exported is None:
            console.print(f"note: {program.name} ({program.share:.0%} of the time) is not tuned: {program.not_tunable}")
    if not found.hot:
        raise UserError(f"no program of profile {name!r} takes {HOT_SHARE:.0%} of the script's time or more "
                        "(`xtat profile` lists them): nothing there to make the script faster")
    # A profiled program is applied by `xtat run` through compile options; a runtime decision holds
    # for the whole process, and a rewrite or a layout needs the traced program: none is searched here.
    kept = [stage for stage in names(stages) if stage in ("passes", "codegen", "tiles")]
    dropped = sorted(set(names(stages)) - set(kept))
    if dropped:
        console.print(f"note: profiled programs are tuned without the {', '.join(dropped)} stage(s): `xtat run` "
                      "applies their configs as compile options")
    functions = [(function.share, [(p.share, workload(p, name)) for p in function.kept])
                 for function in found.functions if function.kept]
    return functions, ",".join(kept)


def _tune_one(workload: Workload, settings: TuneSettings, db: str | None, as_json: bool) -> TuneResult:
    """One workload tuned, with progress on stderr and its result on stdout."""
    from xtat.tuner import tune as run_tune

    failures = 0
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console,
                  disable=not console.is_terminal and as_json) as progress:
        task = progress.add_task(f"tuning {workload.display_name}", total=settings.budget, info="")

        def on_trial(event: TrialEvent) -> None:
            nonlocal failures
            failures += not TrialStatus(event.status).measured
            best = "-" if event.best_s is None else f"{event.best_s * 1e3:.3f} ms"
            progress.update(task, completed=event.index,
                            info=f"failures {failures}  best {best}{'  (resumed)' if event.resumed else ''}")

        with user_errors():
            result = run_tune(workload, db=db, settings=settings, on_trial=on_trial)
    if not as_json:  # with --json, stdout is the JSON object alone
        _show_result(result, settings)
    for note in result.notes:
        console.print(f"note: {note}")
    if as_json:
        keys = ("workload", "fingerprint", "default_ms", "best_ms", "speedup", "speedup_ci", "adopted", "trials",
                "best_config")
        document = result.to_json()
        # One compact line, last, so that scripts can take the final line of stdout.
        emit(json.dumps({**{k: document[k] for k in keys}, **document}) + "\n")
    return result


def _show_result(result: TuneResult, settings: TuneSettings) -> None:
    """A run's result on stdout, as tables and lines."""
    table = Table(title=f"{result.workload}  [{result.fingerprint[:12]}]")
    for column in ("", "median ms", "95% CI ms"):
        table.add_column(column)
    table.add_row("default", f"{result.default_ms:.3f}",
                  f"[{result.default_ci_ms[0]:.3f}, {result.default_ci_ms[1]:.3f}]")
    table.add_row("best", f"{result.best_ms:.3f}", f"[{result.best_ci_ms[0]:.3f}, {result.best_ci_ms[1]:.3f}]")
    out.print(table)
    out.print(f"speedup {result.speedup:.3f}x  95% CI [{result.speedup_ci[0]:.3f}, {result.speedup_ci[1]:.3f}]"
              f"  -> {result.message}")
    out.print(f"trials {result.trials}  new {result.new_trials}  wall {result.wall_s:.1f} s  db {result.db}")
    if result.new_trials:
        out.print(f"time: {result.time_split.describe()}")
    if result.adopted:
        out.print(f"config {json.dumps(result.best_config)}")
    if result.no_ops:
        out.print(f"no-op decisions (never changed the executable): {', '.join(result.no_ops)}")
    if result.pareto:
        front = Table(title=f"Pareto front over {', '.join(settings.objectives)} (ok trials)")
        for column in ("trial", "median ms", "compile s", "peak bytes", "config"):
            front.add_column(column)
        for point in result.pareto:
            front.add_row(str(point.trial), f"{point.median_ms:.3f}" + (" (raced)" if point.raced else ""),
                          "-" if point.compile_s is None else f"{point.compile_s:.2f}",
                          "-" if point.peak_bytes is None else str(point.peak_bytes), json.dumps(point.config))
        out.print(front)


def _open(db: str | None, read_only: bool = True) -> Storage:
    from xtat.store import open_store

    try:
        store = open_store(db, read_only=read_only)
        if read_only and store.is_new():
            store.close()
            _fail(f"no xtat records in {store.where} yet: `xtat tune TARGET --db ...` writes them")
        return store
    except UserError as exc:
        _fail(str(exc))


def _open_workload(db: str | None, name_or_fingerprint: str) -> tuple[Storage, WorkloadRecord]:
    store = _open(db)
    try:
        return store, store.find_workload(name_or_fingerprint)
    except UserError as exc:
        _fail(str(exc))


@app.command()
def show(db: str | None = DbOption) -> None:
    """Workloads in the store with default and best times and speedups."""
    from xtat.capture.workload import environment_differences, environment_identity
    from xtat.tuning.result import recorded_decision

    store = _open(db)
    here = environment_identity()
    table = Table(title=store.where)
    for column in ("workload", "fingerprint", "trials", "default ms", "best ms", "speedup [95% CI]", "adopted",
                   "confirmation", "jax", "device", "applies here"):
        table.add_column(column)
    stale = []
    for w in store.workloads():
        differences = environment_differences(w.env, here)
        trials = store.trials(w.id)
        result = store.latest_result(w.id)
        speedup = "-"
        if result and result.speedup:
            speedup = f"{result.speedup:.3f} [{result.speedup_low:.3f}, {result.speedup_high:.3f}]"
        # The speedup of a run that confirmed its winner is the confirmed one (tuning/confirmation.py).
        summary = result.detail.summary if result else None
        confirmation = recorded_decision(summary).confirmation if summary else None
        confirmed = (f"{confirmation.verdict.value}, {confirmation.rounds} rounds"
                     + (", load-dependent" if confirmation.load_dependent else "")) if confirmation else "-"
        table.add_row(w.name, w.fingerprint[:12], str(len(trials)),
                      _ms(result.default_s if result else None), _ms(result.best_s if result else None),
                      speedup, "yes" if result and result.adopted else "no", confirmed, w.env.get("jaxlib", "?"),
                      w.env.get("device_kind", "?"), "no: stale" if differences else "yes")
        if differences:
            stale.append(f"{w.name} [{w.fingerprint[:12]}] is stale here, never applied (kept as recorded): "
                         f"{differences}")
    out.print(table)
    for line in stale:
        out.print(line, markup=False, highlight=False)


@app.command()
def trials(workload: str = typer.Argument(..., help="Workload name or fingerprint prefix."),
           db: str | None = DbOption, as_json: bool = typer.Option(False, "--json")) -> None:
    """One row per trial of a workload."""
    store, record = _open_workload(db, workload)
    rows = store.trials(record.id)
    if as_json:
        from xtat.store.records import trial_json as _trial_json

        out.print_json(json.dumps([{"id": t.id, **_trial_json(t)} for t in rows]))
        return
    table = Table(title=f"{record.name} [{record.fingerprint[:12]}]")
    for column in ("id", "status", "median ms", "95% CI ms", "speedup (paired)", "compile s", "config", "error"):
        table.add_column(column, overflow="fold")
    for t in rows:
        ci = "-" if t.ci_low_s is None or t.ci_high_s is None else f"[{t.ci_low_s * 1e3:.3f}, {t.ci_high_s * 1e3:.3f}]"
        speedup = "-" if t.speedup is None or not t.config else \
            f"{t.speedup:.3f}x [{t.speedup_low:.3f}, {t.speedup_high:.3f}]"
        table.add_row(str(t.id), t.status + (f" of {t.same_as}" if t.same_as else ""), _ms(t.median_s), ci,
                      speedup, "-" if t.compile_s is None else f"{t.compile_s:.2f}",
                      json.dumps(t.config) if t.config else "default", (t.error or "")[:120])
    out.print(table)


@app.command("export")
def export_(path: Path = typer.Argument(..., help="File to write ('-' for stdout)."),
            db: str | None = DbOption,
            preset: str | None = typer.Option(None, "--preset", help="Write what production needs without xtat: "
                                                 "python (a module of compiler_options dicts), json, or xla-flags "
                                                 "(one XLA_FLAGS value). Default: every record, for `xtat import`."),
            workload: str | None = typer.Option(None, "--workload", help="With --preset: only this workload "
                                                   "(name or fingerprint prefix).")) -> None:
    """Export every workload, trial and result as JSON, or the adopted configs as a preset."""
    if preset is None:
        if workload is not None:
            _fail("--workload selects what a --preset holds; an export for `xtat import` holds every record")
        document = json.dumps(_open(db).export(), indent=1) + "\n"
        notes: list[str] = []
    else:
        from xtat.apply.preset import PresetFormat, collect, render

        try:
            fmt = PresetFormat(preset)
        except ValueError:
            _fail(f"--preset {preset!r} is not one of {', '.join(f.value for f in PresetFormat)}")
        store = _open(db)
        try:
            document, notes = render(collect(store, workload), fmt, source=Path(store.where).name)
        except UserError as exc:
            _fail(str(exc))
    if str(path) == "-":
        emit(document)
    else:
        path.write_text(document)
        console.print(f"wrote {path}")
    for note in notes:
        console.print(f"note: {note}")


@app.command("import")
def import_(path: Path = typer.Argument(..., help="JSON file written by `xtat export`."),
            db: str | None = DbOption,
            prefer_imported: bool = typer.Option(False, "--prefer-imported", help="Let imported results replace "
                                                 "decisions made in this store (default: they apply only where "
                                                 "this store has none).")) -> None:
    """Import an export file; it is validated whole before anything is written."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        _fail(f"no file {path}")
    except json.JSONDecodeError as exc:
        _fail(f"{path} is not valid JSON ({exc}); nothing was imported")
    store = _open(db, read_only=False)
    try:
        report = store.import_(document, prefer_imported=prefer_imported)
    except UserError as exc:
        _fail(str(exc))
    out.print(f"imported {report.added}")
    for line in report.skipped:
        out.print(f"skipped: {line}")


@app.command()
def apply(workload: str = typer.Argument(..., help="Workload name or fingerprint prefix."),
          db: str | None = DbOption,
          print_: bool = typer.Option(True, "--print", help="Print the compile options and environment.")) -> None:
    """The compile options and process environment of a workload's adopted config."""
    from xtat.apply.lookup import Unvetted, vetted

    store, record = _open_workload(db, workload)
    result = store.latest_result(record.id)
    adopted = bool(result and result.adopted)
    refused = None
    try:
        candidate = vetted(store, record, result) if result and adopted else None
    except Unvetted as refusal:
        candidate, refused = None, str(refusal)
    from xtat.core.candidate import ProcessSetup

    setup = candidate.process if candidate else ProcessSetup()
    document = {
        "workload": record.name, "fingerprint": record.fingerprint, "adopted": adopted,
        **({"applied": False, "why": refused} if refused else {}),
        "config": result.config if result and adopted else {},
        "compile_options": candidate.compile_options if candidate else {},
        "program_rewrites": candidate.program if candidate else {},
        **({"layout": _layout_document(candidate.layout)} if candidate and candidate.layout else {}),
        "environment": setup.launch_environment(),
        "launch_prefix": setup.launch_prefix(),
        "tuned_under": record.env,
        "usage": "xtat.jit(fn, db=...) applies the rewrites and compile options, `xtat export --preset` writes "
                 "them for plain jax.jit; `xtat run -- python prog.py` applies the runtime decisions "
                 "(or start the process with launch_prefix)",
    }
    out.print_json(json.dumps(document))


def _layout_document(layout: str) -> dict:
    """An adopted layout as Mesh-TF writes it: the mesh, and the rules `batch:data, d_ff:model`."""
    from xtat.stages.sharding.layouts import Layout

    parsed = Layout.parse(layout)
    return {"mesh": parsed.mesh_notation(), "rules": parsed.rules_notation(),
            "devices": parsed.size,
            "usage": "xtat.jit places the inputs on the mesh and lays out the intermediates marked with "
                     "xtat.constrain; a python preset places the inputs. Start the process with that many devices "
                     f"(on CPU: XLA_FLAGS=--xla_force_host_platform_device_count={parsed.size})"}


@app.command(context_settings={"ignore_unknown_options": True})
def run(command: list[str] = typer.Argument(..., help="The program and its arguments, after `--`."),
        db: str | None = DbOption,
        workload: str | None = typer.Option(None, "--workload", help="Apply this workload's runtime decisions "
                                            "(name or fingerprint prefix) when the store's workloads differ."),
        compare: int = typer.Option(0, "--compare", help="Instead of one run: time the command N times plain and "
                                    "N times under xtat run, alternating, and report the end-to-end speedup."),
        profile: str | None = typer.Option(None, "--profile", help="With --compare: the profile whose shares "
                                           "predict the speedup (default: the one named after the script)."),
        report: Path | None = typer.Option(None, "--report", help="With --compare: also write the figure as "
                                           "DIR/report.html (one self-contained file) and DIR/report.md."),
        ) -> None:
    """Start a program with the adopted CPU count and host device count, and with the adopted compile
    options of every program it compiles through jax: `xtat run -- python train.py`."""
    if report is not None and not compare:
        _fail("--report writes the figure of --compare N: give both")
    if compare:
        _compare_runs(command, db, compare, profile, report)
        return
    from xtat.apply.launch import RuntimePlan, launch, plan
    from xtat.capture.workload import environment_identity
    from xtat.core.candidate import ProcessSetup
    from xtat.store import default_location, open_store, sqlite_path

    location = db or default_location()
    try:
        file = sqlite_path(location)
        if file is not None and not file.exists():
            runtime = RuntimePlan(ProcessSetup(), (), (f"no store at {file}: nothing is tuned yet",))
        else:
            store = open_store(location, read_only=True)
            try:
                runtime = plan(store, environment_identity(), workload)
            finally:
                store.close()
    except UserError as exc:
        _fail(str(exc))
    console.print(f"xtat run: {runtime.describe()}")
    if runtime.skipped:
        console.print(f"xtat run: not applied: {'; '.join(runtime.skipped)}")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        launch(runtime, command, db)
    except UserError as exc:
        _fail(str(exc))


@app.command(context_settings={"ignore_unknown_options": True})
def profile(command: list[str] = typer.Argument(..., help="The program and its arguments, after `--`."),
            db: str | None = DbOption,
            name: str | None = typer.Option(None, "--name", help="The profile's name in the store (default: the "
                                               "script's file name without .py)."),
            ) -> None:
    """Run a program as it is and record every program it compiles through jax, with its share of
    the time; the hot ones are kept for `xtat tune --profile NAME`."""
    from xtat.profile.session import HOT_SHARE
    from xtat.profile.session import profile as run_profile

    name = name or _script_name(command)
    try:
        found = run_profile(command, db, name)
    except UserError as exc:
        _fail(str(exc))
    table = Table(title=f"profile {found.name!r}: {found.wall_s:.2f} s, exit status {found.exit_code}"
                        + ("" if found.complete else " (incomplete)"))
    for column in ("program", "share", "calls", "run s", "compile s", "kept for tuning", "fingerprint"):
        table.add_column(column)
    for p in found.programs:
        kept = ("yes" + (f" ({p.inputs_note})" if p.inputs_note else "") if p.exported is not None
                else p.not_tunable or (f"no: under {HOT_SHARE:.0%}" if p.share < HOT_SHARE else "no"))
        table.add_row(p.name, f"{p.share:.1%}", str(p.calls), f"{p.run_s:.3f}", f"{p.compile_s:.2f}", kept,
                      p.fingerprint[:12])
    out.print(table)
    for note in found.notes:
        console.print(f"note: {note}")
    if found.hot and found.complete:
        console.print(f"next: xtat tune --profile {found.name}" + (f" --db {db}" if db else ""))
    raise typer.Exit(found.exit_code)


def _script_name(command: list[str]) -> str:
    """The first argument that names a .py file (python train.py -> train), else the program's name."""
    for part in command:
        if part.endswith(".py"):
            return Path(part).stem
    return Path(command[0]).name if command else "script"


def _compare_runs(command: list[str], db: str | None, rounds: int, profile_name: str | None,
                  report: Path | None) -> None:
    from xtat.profile.figure import compare
    from xtat.profile.session import latest

    name = profile_name or _script_name(command)
    try:
        try:
            found = latest(db, name)
        except UserError:
            if profile_name is not None:
                raise
            found = None  # no profile of this script: the figure alone, no prediction
        console.print(f"timing {' '.join(command)}: {rounds} rounds, plain and under xtat run, output discarded")
        figure = compare(command, db, rounds, found)
    except UserError as exc:
        _fail(str(exc))
    ratio, low, high = figure.speedup
    table = Table(title=f"plain against xtat run, {figure.rounds} alternating rounds")
    for column in ("plain s (median)", "xtat run s (median)", "speedup [95% CI]", "predicted by the profile"):
        table.add_column(column)
    predicted = "-" if figure.predicted is None else f"{figure.predicted:.3f}x"
    table.add_row(f"{statistics.median(figure.plain_s):.3f}", f"{statistics.median(figure.tuned_s):.3f}",
                  f"{ratio:.3f}x [{low:.3f}, {high:.3f}]", predicted)
    out.print(table)
    if figure.programs:
        programs = Table(title=f"profile {name!r}: each program's share and adopted speedup")
        for column in ("program", "share", "adopted speedup", "store says", "fingerprint"):
            programs.add_column(column)
        for gain in figure.programs:
            programs.add_row(gain.name, f"{gain.share:.1%}", f"{gain.speedup:.3f}x", gain.found, gain.fingerprint[:12])
        out.print(programs)
    if report is not None:
        with user_errors():
            from xtat.report import write_report
            from xtat.report.script import script_report

            try:
                files = write_report(script_report(figure, command, found.name if found else None), report)
            except OSError as exc:
                raise UserError(f"cannot write the report into {report}: {exc}") from None
        console.print(f"report: {files.html} (and {files.markdown.name} beside it)")


@app.command()
@results_only_on_stdout
def explain(target: str | None = typer.Argument(None, help="The workload's TARGET, as for `xtat tune`."),
            db: str | None = DbOption,
            rounds: int = typer.Option(21, help="Interleaved timing rounds."),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Each stage's share of the adopted config's speedup (ablation, measured interleaved)."""
    from xtat.capture.targets import load_target
    from xtat.tuner import TuneSettings
    from xtat.tuning.ablation import explain as run_explain

    try:
        report = run_explain(load_target(target or DEFAULT_TARGET), db=db, settings=TuneSettings(rounds=rounds))
    except UserError as exc:
        _fail(str(exc))
    if as_json:
        emit(json.dumps(report.to_json()) + "\n")
        return
    table = Table(title=f"{report.workload}: ablation of {json.dumps(report.config)}")
    for column in ("variant", "median ms", "speedup [95% CI]", "stage share"):
        table.add_column(column, overflow="fold")
    table.add_row("default", f"{report.default_ms:.3f}", "1", "")
    for name, row in report.variants.items():
        share = report.stage_shares.get(name.removeprefix("without "))
        if row.speedup is not None and row.speedup_ci is not None and row.median_ms is not None:
            low, high = row.speedup_ci
            median, speedup = f"{row.median_ms:.3f}", f"{row.speedup:.3f} [{low:.3f}, {high:.3f}]"
        else:
            median, speedup = "nan", row.error or ""
        table.add_row(name, median, speedup, "" if share is None else f"{share:.0%}")
    out.print(table)
    out.print(f"interaction (not explained by single stages): {report.interaction:.0%}")


suite_app = typer.Typer(help="The built-in model suite.")
app.add_typer(suite_app, name="suite")


@suite_app.command("list")
def suite_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every suite workload; tune one with `xtat tune suite:NAME/train` or `suite:NAME/inference`."""
    from xtat.suite import entries

    found = entries()
    if as_json:
        emit(json.dumps([{"name": e.name, "family": e.family, "description": e.description,
                                      "forms": ["train", "inference"], "knobs": list(e.knobs)}
                                     for e in found.values()]) + "\n")
        return
    table = Table(title=f"{len(found)} suite workloads, each as NAME/train and NAME/inference")
    for column in ("name", "family", "knobs", "description"):
        table.add_column(column, overflow="fold")
    for e in found.values():
        table.add_row(e.name, e.family, ", ".join(e.knobs), e.description)
    out.print(table)


# --- more commands register here (bench, compare): keep one block per command module ---

from xtat.cli.compare import compare  # noqa: E402  (imports nothing heavy until it runs)

app.command()(compare)

from xtat.cli.bench import bench  # noqa: E402  (imports nothing heavy until it runs)

app.command()(bench)


@app.command("model-report")
def model_report(db: str | None = DbOption,
                 holdout: float = typer.Option(0.3, help="Fraction of the timed trials held out for ranking."),
                 seed: int = typer.Option(0, help="Seed of the split and the model."),
                 as_json: bool = typer.Option(False, "--json")) -> None:
    """Ranking quality of the learned cost model on this store: Kendall tau on held-out trials."""
    from xtat.model.cost_model import examples, ranking_report

    store = _open(db)
    feature_sets = [("decisions",), ("decisions", "workload"), ("decisions", "workload", "compiled")]
    try:
        reports = [ranking_report(examples(store, sets), sets, holdout, seed) for sets in feature_sets]
    except UserError as exc:
        _fail(str(exc))
    if as_json:
        emit(json.dumps([asdict(r) for r in reports]) + "\n")
        return
    table = Table(title=f"cost model on {store.where}: {reports[0].workloads} workload(s)")
    for column in ("features", "train", "held out", "Kendall tau", "p", "tau per workload"):
        table.add_column(column)
    for r in reports:
        table.add_row("+".join(r.feature_sets), str(r.train), str(r.test), f"{r.kendall_tau:.3f}",
                      f"{r.p_value:.2g}", ", ".join(f"{k} {v:.2f}" for k, v in r.per_workload.items()) or "-")
    out.print(table)


def main() -> None:
    warnings.filterwarnings("ignore", message=".*os.fork.*")
    # On GPU the tuner shares its device with its workers: it must not take 75% of the memory at
    # start, as jax does by default (read when the backend starts, which is later than this).
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    app()


if __name__ == "__main__":
    main()
