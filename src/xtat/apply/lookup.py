"""What the store says for one lowered program, and what an adopted config asks of production.

Shared by `xtat.jit`, `xtat apply`, `xtat export --preset` and `xtat run`.
Reading never fails the caller: a missing, stale, damaged or foreign store is
a `Lookup` with a reason and no options.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from xtat.capture.workload import Identity, environment_differences
from xtat.core.candidate import AUTOTUNE_FLAG, GPU_PLATFORMS, Candidate, autotune_file
from xtat.core.errors import StoreError, UserError
from xtat.core.space import config_key
from xtat.store.base import LookupReads
from xtat.store.records import Result, WorkloadRecord


class Found(StrEnum):
    """Why a program compiles the way it does."""

    ADOPTED = "adopted"
    NOT_ADOPTED = "not adopted"
    NO_RECORD = "no record"
    STALE = "stale"
    NO_DATABASE = "no database"
    UNREADABLE = "unreadable"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Lookup:
    """What the store says for one lowered program."""

    found: Found
    detail: str = ""
    result_id: int | None = None
    candidate: Candidate = field(default_factory=Candidate)  # every stage's part of the adopted config

    @functools.cached_property
    def options(self) -> dict[str, object]:
        """The compile options, with (on GPU) the recorded autotune results as a file XLA loads. XLA loads
        such a file once per process, at the first compile that names one."""
        results = self.candidate.process.autotune_results
        if not results:
            return self.candidate.compile_options
        return {**self.candidate.compile_options, AUTOTUNE_OPTION: str(autotune_file(results))}

    @functools.cached_property
    def config(self) -> str:
        """The deployed config as one key: signatures with equal keys share a jax.jit."""
        deployed: dict[str, dict[str, object]] = {"program": self.candidate.program, "options": self.options}
        if self.candidate.layout:
            deployed["layout"] = {"layout": self.candidate.layout}
        return config_key(deployed)

    @functools.cached_property
    def shardings(self) -> list | None:
        """Each flat dynamic input's `NamedSharding` under the adopted layout; None without one."""
        if not self.candidate.layout:
            return None
        from xtat.stages.sharding.layouts import Layout, shardings

        return shardings(Layout.parse(self.candidate.layout), self.candidate.input_dims)

    @property
    def reason(self) -> str:
        return f"{self.found.value}: {self.detail}" if self.detail else self.found.value


def lookup(identity: Identity, db: str | Path | None) -> Lookup:
    from xtat.apply.launch import sqlite_file
    from xtat.store.reader import SqliteReader

    file = sqlite_file(db)  # None: a server
    if file is not None and not file.exists():
        return Lookup(Found.NO_DATABASE)
    # An SQLite file of this schema is read with the standard library; anything else (a server, an
    # older or newer schema, a damaged file) through `Store`, which reads, or says why it cannot.
    store: LookupReads | None = SqliteReader.open(file) if file is not None else None
    if store is None:
        from xtat.store import open_store

        try:
            store = open_store(db, read_only=True)
        except StoreError as exc:
            return Lookup(Found.UNREADABLE, str(exc))
    try:
        if store.is_new():
            return Lookup(Found.NO_DATABASE)
        record = store.workload(identity.fingerprint)
        if record is None:
            others = store.workloads_of_program(identity.program)
            if others:
                return Lookup(Found.STALE, environment_differences(others[-1].env, identity.env))
            return Lookup(Found.NO_RECORD)
        result = store.latest_result(record.id)
        if result is None or not result.adopted:
            return Lookup(Found.NOT_ADOPTED)
        try:
            candidate = vetted(store, record, result)
        except Unvetted as refusal:
            return Lookup(Found.REJECTED, str(refusal), result.id)
        return Lookup(Found.ADOPTED, "", result.id, candidate)
    except Exception as exc:  # a damaged file must not break the caller
        return Lookup(Found.UNREADABLE, f"{type(exc).__name__}: {exc}")
    finally:
        store.close()


AUTOTUNE_OPTION = AUTOTUNE_FLAG.removeprefix("--")


class Unvetted(Exception):
    """A stored config that may not be applied here; the message says why."""


def vetted(store: LookupReads, record: WorkloadRecord, result: Result) -> Candidate:
    """What an adopted result asks of production, once vetted (`vetting.py`); Unvetted otherwise."""
    from xtat.store.vetting import refusals

    found = refusals(result.config, str(record.env.get("platform", "")), store.run_settings(result.run_id),
                     [(t.config_key, t.status) for t in store.trials(record.id)])
    autotune_results = result.detail.autotune_results
    if not isinstance(autotune_results, str):
        found.append("the result's autotune results are not text")
    elif autotune_results and record.env.get("platform") not in GPU_PLATFORMS:
        found.append(f"the result carries GPU autotune results but was tuned on {record.env.get('platform')!r}")
    if found:
        raise Unvetted("; ".join(found))
    try:
        candidate = deployment(result.config, autotune_results)
    except (UserError, ValueError) as exc:  # a results file XLA's schema refuses, or tiles it lacks
        raise Unvetted(str(exc)) from None
    if candidate.layout:
        dims = result.detail.input_dims
        if not isinstance(dims, list) or not all(
                d is None or (isinstance(d, list) and all(isinstance(n, str) for n in d)) for d in dims):
            raise Unvetted("the adopted layout's input dimension names are missing or not lists of names")
        candidate = replace(candidate, input_dims=tuple(tuple(d) if d is not None else None for d in dims))
    return candidate


def deployment(config: dict, autotune_results: str = "") -> Candidate:
    """What an adopted config asks of production: rewrites, compile options, environment (with, on GPU,
    the autotune results recorded with it, XLA's choices and the tuned tiles)."""
    from xtat.stages.base import concretize
    from xtat.stages.registry import make_stages
    from xtat.stages.tiles import TilesStage

    stages = make_stages()
    for stage in stages:
        if isinstance(stage, TilesStage):
            stage.pin_to(autotune_results)
    return concretize(stages, config)


def mark_rejected(db: str | Path | None, result_id: int | None, reason: str) -> None:
    """Best effort: record on the result row that this XLA rejected it; never fails the caller."""
    if result_id is None:
        return
    try:
        from xtat.capture.workload import environment_identity
        from xtat.store import open_store

        store = open_store(db)
        try:
            store.mark_rejected(result_id, reason, environment_identity())
        finally:
            store.close()
    except Exception:  # a read-only or busy database: the warning already told the user
        pass
