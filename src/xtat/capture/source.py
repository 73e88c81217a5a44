"""The program file of a workload that `jax.export` cannot carry: its importable source.

Host callbacks (`jax.debug.print`, `jax.debug.callback`, `pure_callback`,
`io_callback`, Equinox's runtime checks) and other effects cannot be
serialized. For such a workload the program file a worker receives is a small
JSON `Source`: the importable target (module or file, and attribute), the
program-stage rewrites of the candidate (and its layout, when marked intermediates
are laid out at trace time), and the program key the tuner traced.
The worker imports the same target, checks that it traces the very same
program (same key), and compiles it with its callbacks, which then run in the
worker (`build.source_program`). Nothing is pickled: the worker gets the target's name,
never objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

SOURCE_FORMAT = "xtat-source/1"


@dataclass(frozen=True)
class Source:
    target: str  # `package.module:attr` or `/absolute/path/file.py:attr`
    program_key: str  # the tuner's trace of the target: the worker's must be the same
    decisions: dict = field(default_factory=dict)  # program-stage rewrites of this candidate
    sys_path: tuple[str, ...] = ()  # where the tuner found the target's imports
    layout: str = ""  # the layout whose placement the worker traces in (marked intermediates), or ""

    def with_decisions(self, decisions: dict, layout: str = "") -> Source:
        return replace(self, decisions=dict(decisions), layout=layout)

    def to_bytes(self) -> bytes:
        return json.dumps({"format": SOURCE_FORMAT, "target": self.target, "program_key": self.program_key,
                           "decisions": self.decisions, "sys_path": list(self.sys_path), "layout": self.layout},
                          sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Source:
        record = json.loads(data)
        if not isinstance(record, dict) or record.get("format") != SOURCE_FORMAT:
            raise ValueError(f"not an {SOURCE_FORMAT} program file")
        target, key, decisions, path = (record.get(k) for k in ("target", "program_key", "decisions", "sys_path"))
        layout = record.get("layout", "")
        if not (isinstance(target, str) and isinstance(key, str) and isinstance(decisions, dict)
                and isinstance(path, list) and all(isinstance(p, str) for p in path) and isinstance(layout, str)):
            raise ValueError(f"malformed {SOURCE_FORMAT} program file")
        return cls(target, key, decisions, tuple(path), layout)


def is_source(data: bytes) -> bool:
    return data[:1] == b"{" and SOURCE_FORMAT.encode() in data[:4096]
