"""What every `xtat` command shares: the consoles, the bad-input exit, the interrupt exit."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console

from xtat.core.errors import UserError

P = ParamSpec("P")
R = TypeVar("R")

console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)  # progress, messages
out = Console(width=None if sys.stdout.isatty() else 160)  # tables and results


def emit(text: str) -> None:
    """Write `text` (a JSON document, a preset) to the results stream: stdout, as `out` writes."""
    out.file.write(text)
    out.file.flush()


def results_only_on_stdout(command: Callable[P, R]) -> Callable[P, R]:
    """A command that keeps stdout for xtat's results (`out`, `emit`) while it runs: what else the process
    loads (jax, Ray, the user's code) and the processes it starts write their output to stderr instead,
    so `--json` prints one JSON document and `xtat tune ... > result.txt` holds the result alone."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        sys.stdout.flush()
        saved_fd, saved_stdout, saved_file = os.dup(1), sys.stdout, out.file
        # Results go where stdout pointed: file descriptor 1, or a stream that stands in for it (a
        # test runner's capture, an embedding program's).
        results = os.fdopen(os.dup(1), "w", buffering=1) if _on_descriptor_1(sys.stdout) else sys.stdout
        os.dup2(2, 1)
        sys.stdout, out.file = sys.stderr, results
        try:
            return command(*args, **kwargs)
        finally:
            results.flush()
            if results is not saved_stdout:
                results.close()
            sys.stdout, out.file = saved_stdout, saved_file
            os.dup2(saved_fd, 1)
            os.close(saved_fd)

    return run


def _on_descriptor_1(stream: object) -> bool:
    fileno = getattr(stream, "fileno", None)
    try:
        return fileno is not None and fileno() == 1
    except (OSError, ValueError):  # a stream with no descriptor (io.StringIO raises)
        return False


def names(text: str) -> tuple[str, ...]:
    """A comma-separated option value (`--stages program,passes`) as its non-empty names."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def fail(message: str) -> NoReturn:
    """Bad input: name what is wrong and what to do, exit 2."""
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


class Terminated(KeyboardInterrupt):
    """SIGTERM (a `kill`, a job scheduler, a CI timeout) stops a command as Ctrl-C does."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


@contextmanager
def user_errors(interrupted: str = "finished trials are kept; run the same command again to resume") -> Iterator[None]:
    """UserError exits 2 with its message; Ctrl-C exits 130 and SIGTERM 143, saying what was kept.

    SIGTERM matters beyond politeness: a command started in the background by a
    non-interactive shell ignores SIGINT, and SIGTERM's default would skip the
    clean-up that stops the workers at once and says how to resume."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    except UserError as exc:
        fail(str(exc))
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        console.print(f"[bold yellow]{'terminated' if terminated else 'interrupted'}[/]: {interrupted}")
        raise typer.Exit(143 if terminated else 130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
