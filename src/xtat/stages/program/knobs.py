"""User knobs: choices written into user code, resolved at trace time.

`knob(name, choices, default)` is called while JAX traces the user's function.
Outside any tuning context it returns `default`, so code that uses knobs runs
unchanged in production. The program stage traces the function inside a
`KnobSession` (held by one `ContextVar`, the only module-level state): during
`discover()` the session records every knob seen, during the trace made by a
`rewrite()`-produced function it also hands out the chosen values.

Knob values live in JSON configs, so choices are JSON scalars (None, bool,
int, float, str). Caveat: a knob read inside a function that JAX caches on its
own (a `jax.jit`-decorated function defined once at module level) is read only
on the first trace; call knobs from code that is traced afresh.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from xtat.core.errors import UserError

KNOB_PREFIX = "knob:"


@dataclass(frozen=True)
class KnobCall:
    """One knob as the user's code declared it."""

    name: str
    choices: tuple
    default: object

    @property
    def decision_id(self) -> str:
        return KNOB_PREFIX + self.name

    def same_declaration(self, other: KnobCall) -> bool:
        return _typed(self.choices) == _typed(other.choices) and _typed((self.default,)) == _typed((other.default,))


@dataclass
class KnobSession:
    """Per-trace state: the chosen values in, the knobs seen out.

    Mutable on purpose, but only ever reachable through `_SESSION` for the
    duration of one trace (see `knob_session`)."""

    chosen: Mapping[str, object] = field(default_factory=dict)
    seen: dict[str, KnobCall] = field(default_factory=dict)

    def resolve(self, call: KnobCall) -> object:
        previous = self.seen.get(call.name)
        if previous is not None and not previous.same_declaration(call):
            raise UserError(
                f"knob {call.name!r} is declared twice with different choices or defaults: "
                f"{list(previous.choices)} (default {previous.default!r}) and "
                f"{list(call.choices)} (default {call.default!r}); give each distinct knob its own name"
            )
        self.seen.setdefault(call.name, call)
        if call.name not in self.chosen:
            return call.default
        value = self.chosen[call.name]
        index = index_of(call.choices, value)
        if index is None:
            raise UserError(
                f"config value {value!r} for knob {call.name!r} is not one of its choices {list(call.choices)}"
            )
        return call.choices[index]


# The one piece of module state: which session (if any) the current trace runs in.
_SESSION: ContextVar[KnobSession | None] = ContextVar("xtat_program_knob_session", default=None)


@contextmanager
def knob_session(chosen: Mapping[str, object] | None = None) -> Iterator[KnobSession]:
    """Run a trace in a fresh session; yields it so the caller can read `seen`."""
    session = KnobSession(chosen=dict(chosen or {}))
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def knob(name: str, choices: Sequence, default: object) -> object:
    """A tunable choice in user code: the tuned value while tuning or applying, else `default`.

    Raises UserError (at trace time) for an empty or invalid `choices`, or a
    `default` that is not one of them."""
    call = _validated(name, choices, default)
    session = _SESSION.get()
    if session is None:
        return call.default
    return session.resolve(call)


def _validated(name: object, choices: object, default: object) -> KnobCall:
    if not isinstance(name, str) or not name:
        raise UserError(f"knob name must be a non-empty string, got {name!r}")
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
        raise UserError(
            f"knob {name!r}: choices must be a list or tuple of values, got {type(choices).__name__} {choices!r}"
        )
    values = tuple(choices)
    if not values:
        raise UserError(f"knob {name!r}: choices are empty; give at least one value")
    for value in values:
        try:
            hash(value)
        except TypeError:
            raise UserError(
                f"knob {name!r}: choice {value!r} is not hashable ({type(value).__name__}); "
                "choices must be None, bool, int, float or str"
            ) from None
        if not _json_scalar(value):
            raise UserError(
                f"knob {name!r}: choice {value!r} ({type(value).__name__}) cannot be stored in a JSON config; "
                "choices must be None, bool, int, float or str"
            )
    # Configs compare values with ==, so 1, 1.0 and True would be one value.
    if len(set(values)) != len(values):
        raise UserError(f"knob {name!r}: choices {list(values)} contain duplicates (values that compare equal)")
    index = index_of(values, default)
    if index is None:
        raise UserError(f"knob {name!r}: default {default!r} is not one of the choices {list(values)}")
    return KnobCall(name, values, values[index])


def _json_scalar(value: object) -> bool:
    if value is None or isinstance(value, (bool, int, str)):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _typed(values: tuple) -> tuple:
    return tuple((type(v), v) for v in values)


def index_of(values: tuple, value: object) -> int | None:
    """Position of `value` in `values`, by value and type (True is not 1)."""
    try:
        hash(value)
    except TypeError:
        return None
    for i, candidate in enumerate(values):
        if type(candidate) is type(value) and candidate == value:
            return i
    return None
