"""Wall time of one party program, split into compute / crypto / messaging."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Dict

__all__ = ["PhaseClock"]


class PhaseClock:
    """Splits a party program's wall time into compute / crypto / messaging.

    Messaging is the endpoint's time inside send/recv (including waiting for
    peers); crypto is time inside ``with clock.crypto():`` blocks, which must
    not contain channel calls; compute is the rest.
    """

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._crypto = 0.0

    @contextmanager
    def crypto(self):
        start = time.perf_counter()
        try:
            yield
        finally:
            self._crypto += time.perf_counter() - start

    def timings(self, endpoint) -> Dict[str, float]:
        total = time.perf_counter() - self._start
        messaging = float(endpoint.messaging_seconds)
        compute = max(0.0, total - messaging - self._crypto)
        return {"compute": compute, "crypto": self._crypto, "messaging": messaging, "total": total}
