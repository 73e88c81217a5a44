"""The store: records of workloads, tuning runs, trials, decisions and profiles, shared by every
tuner and reader of one SQLite file or PostgreSQL study.

Roles outside this package depend on its interfaces (`store.base`: `LookupReads`,
`TuningStorage`, `ProfileStorage`, `ExchangeStorage`, `Storage`) and open a store with
`open_store`; only this package imports the SQLAlchemy implementation (`store.sql`), and not until
a store is opened, so importing `xtat.store` stays light.
"""

from __future__ import annotations

from pathlib import Path

from xtat.store.base import ExchangeStorage, LookupReads, ProfileStorage, Storage, TuningStorage
from xtat.store.location import default_location, default_path, is_url, owner_id, sqlite_path


def open_store(location: str | Path | None = None, read_only: bool = False) -> Storage:
    """The store at `location` (a path, a sqlite:/// URL or a postgresql:// URL; None: `$XTAT_DB`,
    else ~/.cache/xtat/xtat.db), created when it is new unless `read_only`. StoreError when it is not
    an xtat store of a schema this xtat reads (left unchanged)."""
    from xtat.store.sql import Store

    return Store.open(location, read_only=read_only)


__all__ = ["ExchangeStorage", "LookupReads", "ProfileStorage", "Storage", "TuningStorage", "default_location",
           "default_path", "is_url", "open_store", "owner_id", "sqlite_path"]
