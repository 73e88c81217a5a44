"""The measuring lock of a host's device: nothing is timed while anything else is timed or compiled.

Timing a candidate while another process times one on the same cores (or GPU), or compiles on
them, measures it wrong. Every timing request of every xtat process on a host holds this lock
exclusively, and every compile of a search candidate holds it shared, so that compiles run side
by side (a run's compile slots: `runner.process.ProcessRunner.slots`) but never during a timing.
It is an advisory `flock` on a file per device in the temporary folder (on GPU one per GPU, a run
whose layouts span several holding each; on CPU one for the host), which the kernel releases when
its holder dies, even by SIGKILL. Deadlines start once it is held.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from xtat.core.candidate import GPU_PLATFORMS


def measured_device(platform: str, count: int = 1) -> str | None:
    """On GPU, the devices a run's workers see (`CUDA_VISIBLE_DEVICES`): the first `count` this process
    may use, one unless the sharding stage lays programs out over several. A worker that saw every
    GPU would time on one and hold memory on all."""
    if platform not in GPU_PLATFORMS:
        return None
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return ",".join((visible or [str(i) for i in range(count)])[:count])


def host_locks(platform: str, device: str | None = None) -> tuple[Path, ...]:
    """The locks a run times under: one per GPU of `device` ("3" or "3,5"), or the host's CPUs' one."""
    return tuple(Path(tempfile.gettempdir()) / f"xtat-measure-{platform}-{one}.lock"
                 for one in (device or "0").split(","))


@contextmanager
def holding(paths: str | Path | Sequence[Path] | None, shared: bool = False) -> Iterator[None]:
    """Hold the lock at each of `paths` (None: no lock), always in one order, for the duration of the
    block: exclusively to time, `shared` to compile. Never taken while the thread holds it already."""
    if paths is None:
        yield
        return
    with ExitStack() as held:
        for path in sorted([Path(paths)] if isinstance(paths, (str, Path)) else paths):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            held.callback(os.close, fd)  # closing releases the lock
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
