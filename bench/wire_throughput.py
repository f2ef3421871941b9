"""What one large tensor costs on the judge <-> candidate wire
(python/kforge_worker/candidate/wire.py).

A tensor of 1 MiB or more travels through the sender's device arena (GPU memory exported as a
descriptor: one device-to-device copy on each side), its host arena (a memfd both sides keep
mapped, written again for every message) or, when a message's large tensors pass ARENA_MAX_BYTES, as
a sealed memfd of its own: the sender writes its bytes (from a GPU through a pinned staging
buffer), the receiver copies them out (on a GPU, onto the device). This times a whole
send-and-receive both ways, then the memfd path's steps: wire's send, the earlier send (a copy
into the memfd's mapped pages) and the receive, the last two with and without MAP_POPULATE
(the pages made present by one call instead of one fault per 4 KiB), next to a pinned-memory
copy each way (the bus's bound):

    python bench/wire_throughput.py [--device cuda:0] [--mib 64] [--repeats 10]

It prints the median of each step in ms and the GB/s it amounts to.
"""

from __future__ import annotations

import argparse
import fcntl
import mmap
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from kforge_worker.candidate import arena, wire
from kforge_worker.core.protocol import StreamChannel

SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_ms(step: Callable[[], object], device: torch.device, repeats: int) -> float:
    samples = []
    for _ in range(repeats + 1):  # the first is a warm-up
        _sync(device)
        start = time.perf_counter()
        out = step()
        _sync(device)
        samples.append((time.perf_counter() - start) * 1e3)
        del out
    return statistics.median(samples[1:])


def _to_memfd_mapped(src: torch.Tensor, populate: bool) -> int:
    """The earlier send path: one copy straight into the memfd's fresh pages."""
    flat = src.reshape(-1).view(torch.uint8)
    fd = os.memfd_create("bench", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, flat.numel())
    flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0)
    with mmap.mmap(fd, flat.numel(), flags=flags) as mm:
        dst = torch.frombuffer(mm, dtype=torch.uint8)
        dst.copy_(flat)
        del dst
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd


def _from_memfd(fd: int, size: int, device: torch.device, populate: bool) -> torch.Tensor:
    flags = mmap.MAP_PRIVATE | (mmap.MAP_POPULATE if populate else 0)
    mm = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    host = torch.frombuffer(mm, dtype=torch.uint8)
    return host.to(device) if device.type != "cpu" else host.clone()


def _round_trip_ms(src: torch.Tensor, device: torch.device, repeats: int, path: str) -> float:
    """wire.send on one end of a socket pair, wire.receive on the other (onto `device`):
    through the sender's device arena (`path` "device", GPU memory exported as a descriptor),
    its host arena ("arena"; both made by the first send, the warm-up) or one sealed memfd per
    tensor ("memfd")."""
    saved = wire.wants_arena
    wire.wants_arena = lambda _tensors: path != "memfd"  # host tensors too, on the cpu device
    saved_sharing = dict(arena._SHARING)
    if path != "device":
        arena._SHARING[src.device] = False
    a, b = socket.socketpair()
    sender, receiver = StreamChannel(a), StreamChannel(b)

    def step() -> object:
        thread = threading.Thread(target=wire.send, args=(sender, {"type": "t"}, [src]))
        thread.start()
        got = wire.receive(receiver, device, 1 << 40)
        thread.join()
        return got

    try:
        return _median_ms(step, device, repeats)
    finally:
        wire.wants_arena = saved
        arena._SHARING.clear()
        arena._SHARING.update(saved_sharing)
        a.close()
        b.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    if args.mib < 1:
        parser.error("--mib must be at least 1")
    device = torch.device(args.device)
    size = args.mib << 20
    src = torch.randint(0, 255, (size,), dtype=torch.uint8, device=device)
    rows: list[tuple[str, float]] = []
    if device.type == "cuda" and arena.shares_device(src.device):
        rows.append(
            ("round trip: wire, device arena", _round_trip_ms(src, device, args.repeats, "device"))
        )
    rows.append(("round trip: wire, arena", _round_trip_ms(src, device, args.repeats, "arena")))
    rows.append(
        ("round trip: wire, memfd per tensor", _round_trip_ms(src, device, args.repeats, "memfd"))
    )
    rows.append(
        (
            "send: sealed memfd (staged, pwrite)",
            _median_ms(lambda: os.close(wire._sealed_memfd(src)), device, args.repeats),
        )
    )
    for populate in (False, True):
        tag = "populate" if populate else "faults"
        rows.append(
            (
                f"send: copy into mapped memfd ({tag})",
                _median_ms(
                    lambda p=populate: os.close(_to_memfd_mapped(src, p)), device, args.repeats
                ),
            )
        )
        fd = _to_memfd_mapped(src, False)
        rows.append(
            (
                f"receive: memfd -> {device.type} ({tag})",
                _median_ms(
                    lambda p=populate, f=fd: _from_memfd(f, size, device, p), device, args.repeats
                ),
            )
        )
        os.close(fd)
    if device.type == "cuda":
        pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        rows.append(("pinned D2H", _median_ms(lambda: pinned.copy_(src), device, args.repeats)))
        rows.append(("pinned H2D", _median_ms(lambda: src.copy_(pinned), device, args.repeats)))
    print(
        f"\nwire throughput, {device}, one tensor of {args.mib} MiB "
        f"(wire.FD_MIN_BYTES = {wire.FD_MIN_BYTES})"
    )
    for name, ms in rows:
        print(f"{name:40s} {ms:8.2f} ms  {size / ms / 1e6:6.2f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
