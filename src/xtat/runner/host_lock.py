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

from xtat.candidate import GPU_PLATFORMS


def measured_device(platform: str) -> str | None:
    """On GPU, the one device a run's workers see (`CUDA_VISIBLE_DEVICES`): the first this process
    may use. A worker that saw every GPU would time on one and hold memory on all."""
    if platform not in GPU_PLATFORMS:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    return visible.split(",")[0] if visible else "0"


def host_lock_path(platform: str, device: str | None = None) -> Path:
    """The lock of one device: per GPU on a GPU host, one for the host's CPUs otherwise."""
    return Path(tempfile.gettempdir()) / f"xtat-measure-{platform}-{device or 0}.lock"


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
