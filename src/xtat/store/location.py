"""Where a store lives, read without SQLAlchemy (a process that only applies configs does not import
it): the default location, SQLite files and server URLs, and who claims trials."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from xtat.core.errors import StoreError

SERVER_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")


def default_location() -> str | Path:
    """$XTAT_DB (a path or a URL), else the SQLite file under ~/.cache/xtat."""
    return os.environ.get("XTAT_DB") or Path.home() / ".cache" / "xtat" / "xtat.db"


def default_path() -> Path:
    """The default SQLite file, for what keeps files of its own beside it (compare, bench):
    $XTAT_DB when it is a path, else ~/.cache/xtat/xtat.db."""
    location = default_location()
    return Path.home() / ".cache" / "xtat" / "xtat.db" if is_url(location) else Path(location)


def is_url(location: str | Path) -> bool:
    return isinstance(location, str) and "://" in location


def sqlite_path(location: str | Path | None) -> Path | None:
    """The file of an SQLite location (a path or a sqlite:/// URL; None: the default location); None
    for a server URL. StoreError for any other URL."""
    location = default_location() if location is None else location
    if not is_url(location):
        return Path(location)
    text = str(location)
    if text.startswith("sqlite:///"):
        return Path(text[len("sqlite:///"):])
    if text.split("://", 1)[0] in SERVER_SCHEMES:
        return None
    raise StoreError(f"unknown store location {redacted(text)!r}: give a path, a sqlite:/// URL or a "
                     "postgresql://USER:PASSWORD@HOST/DB URL")


def redacted(url: str) -> str:
    """A URL fit for messages: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()


def owner_id() -> str:
    """Who claims trials: this process on this host (a fresh id per process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
