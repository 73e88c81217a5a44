"""The store's schema, one definition for every backend (SQLite, PostgreSQL), and its migrations.

Tables are SQLAlchemy Core; JSON lives in text columns (the same on both backends, and never
pickled). A store records its schema version in `meta`; opening a store of an older version
applies the migrations after it, in one transaction, and a newer one is refused. Every migration
so far adds columns: each names the columns it adds, whose definitions come from the tables below.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from xtat.store.rows import APPLICATION, SCHEMA_VERSION  # noqa: F401  (readable without SQLAlchemy)

metadata = sa.MetaData()

meta = sa.Table("meta", metadata, sa.Column("key", sa.Text, primary_key=True),
                sa.Column("value", sa.Text, nullable=False))

workloads = sa.Table(
    "workloads", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("fingerprint", sa.Text, nullable=False, unique=True),
    sa.Column("program", sa.Text, nullable=False, index=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("env", sa.Text, nullable=False),
    sa.Column("info", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("workload_id", sa.Integer, sa.ForeignKey("workloads.id"), nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),  # searching, deciding, finished (or imported)
    sa.Column("owner", sa.Text),  # the tuner of a run in progress, under a lease as its trials are
    sa.Column("lease_until", sa.Float),
)

trials = sa.Table(
    "trials", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("workload_id", sa.Integer, sa.ForeignKey("workloads.id"), nullable=False),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
    sa.Column("config_key", sa.Text, nullable=False),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("compile_s", sa.Float),
    sa.Column("exe_hash", sa.Text),
    sa.Column("median_s", sa.Float),
    sa.Column("ci_low_s", sa.Float),
    sa.Column("ci_high_s", sa.Float),
    sa.Column("samples", sa.Text),
    sa.Column("max_abs_err", sa.Float),
    sa.Column("max_rel_err", sa.Float),
    sa.Column("same_as", sa.Integer, sa.ForeignKey("trials.id")),
    sa.Column("worker_s", sa.Float),
    sa.Column("spent_s", sa.Float),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float),
    sa.Column("metrics", sa.Text),
    sa.Column("raced", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("owner", sa.Text),  # the tuner measuring a running trial
    sa.Column("lease_until", sa.Float),  # its claim holds until then unless renewed by its heartbeat
    sa.Column("node", sa.Text),
    sa.Column("reference_samples", sa.Text),
    sa.Column("speedup", sa.Float),
    sa.Column("speedup_low", sa.Float),
    sa.Column("speedup_high", sa.Float),
    sa.UniqueConstraint("workload_id", "config_key"),
)

results = sa.Table(
    "results", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("workload_id", sa.Integer, sa.ForeignKey("workloads.id"), nullable=False),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
    sa.Column("adopted", sa.Boolean, nullable=False),
    sa.Column("config", sa.Text, nullable=False),
    sa.Column("default_s", sa.Float),
    sa.Column("best_s", sa.Float),
    sa.Column("speedup", sa.Float),
    sa.Column("speedup_low", sa.Float),
    sa.Column("speedup_high", sa.Float),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

machine = sa.Table("machine", metadata, sa.Column("key", sa.Text, primary_key=True),
                   sa.Column("value", sa.Text, nullable=False), sa.Column("measured_at", sa.Float, nullable=False))

# Named locks held under a lease, as trials are claimed: e.g. the decision of a workload shared
# by several tuners, taken by one of them at a time.
locks = sa.Table("locks", metadata, sa.Column("name", sa.Text, primary_key=True),
                 sa.Column("owner", sa.Text, nullable=False), sa.Column("lease_until", sa.Float, nullable=False))


# `xtat profile`: one row per profiled run of a script, and one per program it compiled.
profiles = sa.Table(
    "profiles", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Text, nullable=False, index=True),
    sa.Column("command", sa.Text, nullable=False),  # JSON list
    sa.Column("cwd", sa.Text, nullable=False),  # the directory it ran in
    sa.Column("env", sa.Text, nullable=False),  # the environment identity the programs were keyed in
    sa.Column("complete", sa.Boolean, nullable=False),  # exit status 0 and the recorder's file whole
    sa.Column("exit_code", sa.Integer, nullable=False),
    sa.Column("wall_s", sa.Float, nullable=False),
    sa.Column("notes", sa.Text, nullable=False),  # JSON list of what the profile could not do
    sa.Column("created_at", sa.Float, nullable=False),
)

profiled_programs = sa.Table(
    "profiled_programs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("profile_id", sa.Integer, sa.ForeignKey("profiles.id"), nullable=False, index=True),
    sa.Column("fingerprint", sa.Text, nullable=False),
    sa.Column("program", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("avals", sa.Text, nullable=False),  # JSON, as `describe_avals` writes them
    sa.Column("calls", sa.Integer, nullable=False),
    sa.Column("run_s", sa.Float, nullable=False),
    sa.Column("compile_s", sa.Float, nullable=False),
    sa.Column("share", sa.Float, nullable=False),  # run_s / the script's wall time
    sa.Column("exported", sa.LargeBinary),  # jax.export serialization (hot programs)
    sa.Column("inputs", sa.LargeBinary),  # .npz of its first call's inputs, or NULL (seeded inputs)
    sa.Column("inputs_note", sa.Text, nullable=False),
    sa.Column("not_tunable", sa.Text, nullable=False),
    sa.Column("function", sa.Text),  # the traced Python function; NULL: none known (schema 6)
    sa.Column("ranges", sa.Text),  # JSON: each input's [low, high] for seeded inputs, or NULL
)


def _add_columns(*columns: sa.Column) -> Callable[[sa.Connection], None]:
    def migrate(conn: sa.Connection) -> None:
        for column in columns:
            if not sa.inspect(conn).has_table(column.table.name):
                continue  # a table newer than the store: `create_all` makes it whole
            spec = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {column.table.name} ADD COLUMN {spec}")
    return migrate


def _raced_from_metrics(conn: sa.Connection) -> None:
    # Schema 2 kept `raced` among a trial's metrics; only SQLite stores were ever at schema 2.
    _add_columns(trials.c.raced)(conn)
    conn.exec_driver_sql("UPDATE trials SET raced = 1 WHERE json_extract(metrics, '$.raced') = 1")


# The migration to each version from the one before it (tables new in a version are created by
# `metadata.create_all` after the migrations).
MIGRATIONS: dict[int, Callable[[sa.Connection], None]] = {
    2: _add_columns(trials.c.metrics),
    3: _raced_from_metrics,
    4: _add_columns(trials.c.owner, trials.c.lease_until, trials.c.node, runs.c.owner, runs.c.lease_until),
    5: _add_columns(trials.c.reference_samples, trials.c.speedup, trials.c.speedup_low, trials.c.speedup_high),
    6: lambda conn: None,  # new tables only
    7: _add_columns(profiled_programs.c.function, profiled_programs.c.ranges),
}
assert sorted(MIGRATIONS) == list(range(2, SCHEMA_VERSION + 1))
