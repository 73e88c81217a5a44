"""A tuner's claims on a shared study: who it is, and the heartbeat that keeps its leases alive.

Every trial a tuner measures, and the decision it takes, is claimed in the store under a lease
(`Storage.start_trial`, `Storage.try_lock`). The heartbeat renews them all a few times per lease;
a killed tuner's leases run out and another tuner re-claims its trials (at once on the same host,
where the store sees that its process is gone).
"""

from __future__ import annotations

import threading
from types import TracebackType

from xtat.core.errors import StoreError
from xtat.store.base import Storage


class Heartbeat:
    """Renews `owner`'s leases every `lease_s / 4` seconds while the block runs."""

    def __init__(self, store: Storage, owner: str, lease_s: float):
        self.store, self.owner, self.lease_s = store, owner, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="xtat-heartbeat", daemon=True)
        self.failures = 0  # renewals that failed (the server was briefly unreachable)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                self.store.renew(self.owner, self.lease_s)
            except StoreError:
                self.failures += 1  # the next beat tries again; a lease outlives three missed beats

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
