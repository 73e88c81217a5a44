"""The measuring lock of a host's device: two tuners on one machine never time at the same moment.

Timing a candidate while another process times one on the same cores (or GPU) measures both
wrong; compiling meanwhile is allowed. Every timing request of every xtat process on a host takes
this lock first, an advisory `flock` on a file per platform in the temporary folder, which the
kernel releases when its holder dies, even by SIGKILL. Deadlines start once it is held.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def host_lock_path(platform: str, device: int = 0) -> Path:
    return Path(tempfile.gettempdir()) / f"xtat-measure-{platform}-{device}.lock"


@contextmanager
def holding(path: Path | None) -> Iterator[None]:
    """Hold the lock at `path` (None: no lock) for the duration of the block."""
    if path is None:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
