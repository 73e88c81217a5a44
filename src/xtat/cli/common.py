"""What every `xtat` command shares: the consoles, the bad-input exit, the interrupt exit."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, NoReturn

import typer
from rich.console import Console

from xtat.errors import UserError

console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)  # progress, messages
out = Console(width=None if sys.stdout.isatty() else 160)  # tables and results


def names(text: str) -> tuple[str, ...]:
    """A comma-separated option value (`--stages program,passes`) as its non-empty names."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def fail(message: str) -> NoReturn:
    """Bad input: name what is wrong and what to do, exit 2."""
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


@contextmanager
def user_errors(interrupted: str = "finished trials are kept; run the same command again to resume") -> Iterator[None]:
    """UserError exits 2 with its message; Ctrl-C exits 130 saying what was kept."""
    try:
        yield
    except UserError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        console.print(f"[bold yellow]interrupted[/]: {interrupted}")
        raise typer.Exit(130) from None
