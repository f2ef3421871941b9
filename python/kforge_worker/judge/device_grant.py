"""The exclusive device grant around a pipelined job's timed regions.

With pipelined stages (docs/worker-protocol.md "Device grant (pipelined stages)") a Python
job is admitted with a shared grant: its import, compile and correctness phases overlap
other jobs'. Its timed regions (reference and candidate timing, the profiled passes, device
metrics) run under the exclusive grant, asked for here: `device_request` with mode
`exclusive`, then `device_grant` from the supervisor, then `device_release` once the GPU
work is done. The job holds nothing after the release (it sends its result next).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from kforge_worker.core.protocol import StreamChannel

# A context manager factory: the timed regions run inside it.
ExclusiveFn = Callable[[], contextlib.AbstractContextManager[None]]


class GrantLost(Exception):
    """The supervisor hung up (or said shutdown) before it granted the device."""


class ExclusiveGrant:
    """Asks the supervisor of this child for the device alone."""

    def __init__(self, channel: StreamChannel) -> None:
        self._channel = channel
        self.grants = 0

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self._channel.send({"type": "device_request", "mode": "exclusive"})
        while True:
            message = self._channel.recv()
            if message is None or message.get("type") == "shutdown":
                raise GrantLost("the supervisor hung up before it granted the device")
            if message.get("type") == "device_grant":
                break
        self.grants += 1
        try:
            yield
        finally:
            self._channel.send({"type": "device_release"})


def no_grant() -> contextlib.AbstractContextManager[None]:
    """The device is already this job's (no pipelining): nothing to ask."""
    return contextlib.nullcontext()
