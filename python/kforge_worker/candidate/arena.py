"""The arenas of the judge <-> candidate wire (wire.py's module docstring says how they are used):
this side's outgoing host arena (a sealed memfd) and device arena (an exportable CUDA
allocation, devmem.py), the peer's as this side maps them, placing a message's tensors in them
and copying received ones out; and the byte-level helpers the wire shares with them (a
tensor's bytes, pinned staging, exact reads, single descriptors).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import socket
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kforge_worker.core import devmem
from kforge_worker.core.devinfo import is_device_oom
from kforge_worker.core.protocol import ProtocolError, StreamChannel

_CHUNK = 1 << 24


STAGING_BYTES = 1 << 25  # a device tensor reaches its memfd through pinned memory in such chunks


ARENA_MAX_BYTES = 1 << 30  # a message's large tensors up to this travel through the arena


DEVICE_ARENA_MAX = 1 << 40  # the largest device arena a receiver maps (address space only)


# A device arena above this, or above 1/16 of the GPU's memory if that is more, serves one
# message (module docstring): the memory goes back as soon as the peer has read it. (Each new
# arena costs an allocation, an export and a mapping: kept arenas are faster.)
DEVICE_ARENA_KEEP_BYTES = 1 << 30


DEVICE_ARENA_KEEP_FRACTION = 16


# Free device memory a single-use arena's sender leaves the receiver beyond the copy itself
# (its allocator's rounding, the kernel's own scratch); short of it the sender empties its cache.
PEER_HEADROOM_BYTES = 1 << 30


_PAGE = 4096


_F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)


def tensor_bytes(t: torch.Tensor) -> torch.Tensor:
    """`t`'s bytes as a flat uint8 tensor on its own device (contiguous, no host copy)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def host_chunks(src: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
    """The flat uint8 `src` in host memory as (offset, chunk) pairs, each valid until the next
    is asked for: a host tensor whole; a device tensor through the pinned staging buffer, a
    chunk at a time (a device-to-host copy into pinned memory runs at the bus's speed, 53 GB/s
    on an H200, one into fresh pageable pages under 1 GB/s: bench/wire_throughput.py), or in
    one pageable copy where pinned memory cannot be had."""
    staging = _staging_buffer() if src.device.type != "cpu" else None
    if staging is None:
        yield 0, src.cpu()
        return
    step = staging.numel()
    for offset in range(0, src.numel(), step):
        part = src[offset : offset + step]
        chunk = staging[: part.numel()]
        chunk.copy_(part)  # synchronous: the bytes are in host memory when it returns
        yield offset, chunk


_STAGING: list[torch.Tensor | None] = []


def _staging_buffer() -> torch.Tensor | None:
    """This process's pinned staging buffer (STAGING_BYTES), made on first use; None where
    pinned memory cannot be had (the process then copies without it)."""
    if not _STAGING:
        try:
            _STAGING.append(torch.empty(STAGING_BYTES, dtype=torch.uint8, pin_memory=True))
        except RuntimeError:
            _STAGING.append(None)
    return _STAGING[0]


def note_placed(
    message: dict[str, Any],
    specs: list[dict[str, Any]],
    indices: list[int],
    placed: tuple[list[int], int | None, int],
    via: str,
) -> int | None:
    """Marks the tensors at `indices` as placed in an arena (`via` "arena" or "device") at
    their offsets, and a new arena in the message; the new arena's descriptor, or None."""
    offsets, fd, size = placed
    for i, offset in zip(indices, offsets, strict=True):
        specs[i]["via"], specs[i]["offset"] = via, offset
    if fd is not None:
        message["arena" if via == "arena" else "device_arena"] = {"size": size}
    return fd


@dataclass
class _Arena:
    """A memfd mapped shared: this side's outgoing arena (writable) or the peer's (read)."""

    size: int
    view: torch.Tensor  # uint8 over the whole mapping (it keeps the mapping alive)


@dataclass
class _ArenaState:
    mine: _Arena | None = None
    peer: _Arena | None = None
    device_mine: devmem.Block | None = None
    device_peer: devmem.Block | None = None
    # This side's arenas replaced or used once, released when the peer next answers.
    device_retired: list[devmem.Block] = field(default_factory=list)


_ARENAS: weakref.WeakKeyDictionary[StreamChannel, _ArenaState] = weakref.WeakKeyDictionary()


def arena_state(channel: StreamChannel) -> _ArenaState:
    state = _ARENAS.get(channel)
    if state is None:
        state = _ARENAS[channel] = _ArenaState()
    return state


def wants_arena(tensors: list[torch.Tensor]) -> bool:
    """Device tensors go through the arena (the receiver copies them onto its device anyway,
    and the sender's pages are allocated once); host tensors as sealed memfds, which the
    receiver maps without a copy."""
    return any(t.device.type != "cpu" for t in tensors)


def _page_offsets(tensors: list[torch.Tensor]) -> tuple[list[int], int]:
    """Where each tensor's bytes start in an arena that holds them one after another at
    page-aligned offsets, and the bytes that takes."""
    offsets, total = [], 0
    for t in tensors:
        offsets.append(total)
        total += -(-t.numel() * t.element_size() // _PAGE) * _PAGE
    return offsets, total


def place_in_arena(
    channel: StreamChannel, tensors: list[torch.Tensor]
) -> tuple[list[int], int | None, int] | None:
    """Writes `tensors` into this side's arena at page-aligned offsets: (the offsets, the fd
    of a new arena to pass along or None, its size), or None when they take more than
    ARENA_MAX_BYTES or no arena can be made (then they travel as sealed memfds)."""
    offsets, total = _page_offsets(tensors)
    if total > ARENA_MAX_BYTES:
        return None
    state = arena_state(channel)
    new_fd: int | None = None
    if state.mine is None or state.mine.size < total:
        size = min(ARENA_MAX_BYTES, max(total, 2 * state.mine.size if state.mine else 0))
        try:
            new_fd, arena = _new_arena(size)
        except OSError:
            return None
        state.mine = arena
    for t, offset in zip(tensors, offsets, strict=True):
        for at, chunk in host_chunks(tensor_bytes(t)):
            state.mine.view[offset + at : offset + at + chunk.numel()].copy_(chunk)
    return offsets, new_fd, state.mine.size


_SHARING: dict[torch.device, bool] = {}


def shares_device(device: torch.device) -> bool:
    """Whether tensors on `device` go through the device arena (asked of the driver once)."""
    if device.type != "cuda":
        return False
    if device not in _SHARING:
        _SHARING[device] = devmem.supported(device)
    return _SHARING[device]


def place_on_device(
    channel: StreamChannel, tensors: list[torch.Tensor]
) -> tuple[list[int], int | None, int] | None:
    """Copies `tensors` (all on one CUDA device) into this side's device arena, device to
    device, at page-aligned offsets: (the offsets, the descriptor of a new arena to pass along
    or None, its size), or None when the driver refuses an arena (they then travel through
    host memory, and this process stops asking)."""
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        return None
    offsets, total = _page_offsets(tensors)
    state = arena_state(channel)
    new_fd: int | None = None
    mine = state.device_mine
    if mine is None or mine.size < total or single_use(mine):
        if mine is not None:
            # Not answered yet (two messages in a row): the peer may not have mapped it, so it
            # goes back at the peer's next message.
            state.device_retired.append(mine)
            state.device_mine = None
        block = _allocate_arena(device, total)
        if block is None:
            return None
        try:
            new_fd = block.export()
        except devmem.DeviceMemoryError:
            block.close()
            _SHARING[device] = False
            return None
        state.device_mine = block
        mine = block
    view = mine.view
    for t, offset in zip(tensors, offsets, strict=True):
        src = tensor_bytes(t)
        view[offset : offset + src.numel()].copy_(src)
    torch.cuda.synchronize(device)  # the bytes are in place before the peer hears of them
    if single_use(mine):
        _make_room_for_peer(device, total)
    return offsets, new_fd, mine.size


def _make_room_for_peer(device: torch.device, nbytes: int) -> None:
    """Before a single-use arena's message goes out: the peer copies `nbytes` out of it into
    memory of its own, so where the GPU's free memory is short of that, this process gives
    back what torch keeps cached (a GB-sized input's earlier copies, say). Both processes of
    a job share one GPU, and the receiver cannot free what the sender's allocator holds (with
    this, the judge's views and the candidate's digests, KernelBench's 17 GB input fit an
    80 GB H100)."""
    free, _ = torch.cuda.mem_get_info(device)
    if free < nbytes + PEER_HEADROOM_BYTES:
        torch.cuda.empty_cache()


def keep_bytes(device: torch.device) -> int:
    """The largest device arena kept for the next message on `device` (module docstring)."""
    if device not in _KEEP:
        total = torch.cuda.get_device_properties(device).total_memory
        _KEEP[device] = max(DEVICE_ARENA_KEEP_BYTES, total // DEVICE_ARENA_KEEP_FRACTION)
    return _KEEP[device]


_KEEP: dict[torch.device, int] = {}


def single_use(block: devmem.Block) -> bool:
    """Whether a device arena serves one message only (module docstring)."""
    return block.size > keep_bytes(block.view.device)


def release_cached(device: torch.device) -> None:
    """Gives back what torch's allocator keeps cached on `device` when that is more than
    keep_bytes (1/16 of the GPU): a job's two processes share one GPU, and GB-sized blocks one
    of them freed after the correctness trials are memory the other cannot have for the
    timed ones. Smaller caches stay (giving them back costs their reallocation)."""
    if device.type != "cuda":
        return
    idle = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    if idle > keep_bytes(device):
        torch.cuda.empty_cache()


def _allocate_arena(device: torch.device, nbytes: int) -> devmem.Block | None:
    """A device arena of at least `nbytes`, or None. Out of memory, torch's cached blocks are
    given back and it is tried once more; still out of memory, this message travels through
    host memory (the next one asks again). Any other refusal means the driver cannot export
    memory here: this process stops asking."""
    for attempt in (0, 1):
        try:
            return devmem.allocate(device, nbytes)
        except devmem.DeviceMemoryError as e:
            if e.code != devmem.CUDA_ERROR_OUT_OF_MEMORY:
                _SHARING[device] = False
                return None
            if attempt == 0:
                torch.cuda.empty_cache()  # memory torch keeps cached is not the driver's to give
    return None


def _new_arena(size: int) -> tuple[int, _Arena]:
    """A memfd of `size` bytes sealed against resizes (and, where the kernel has it, against
    writable mappings other than this one), mapped shared here."""
    fd = os.memfd_create("kforge-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)  # over the jail's RLIMIT_FSIZE: OSError here
        mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        with contextlib.suppress(OSError):  # Linux >= 5.1
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _F_SEAL_FUTURE_WRITE)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd, _Arena(size, torch.frombuffer(mm, dtype=torch.uint8))


def release_single_use(state: _ArenaState) -> None:
    """The peer has answered, so it has read every arena this side sent: the single-use one
    and those replaced since go back (module docstring)."""
    mine = state.device_mine
    if mine is not None and single_use(mine):
        state.device_retired.append(mine)
        state.device_mine = None
    for block in state.device_retired:
        block.close()
    state.device_retired.clear()


def clone_out(view: torch.Tensor, index: int) -> torch.Tensor:
    """A copy of our own of a tensor in the peer's device arena. Out of device memory,
    torch's cached blocks are given back and it is tried once more; then the error says what
    did not fit."""
    try:
        return view.clone()
    except RuntimeError as e:
        if not is_device_oom(e):
            raise
    torch.cuda.empty_cache()
    try:
        return view.clone()
    except RuntimeError as e:
        if not is_device_oom(e):
            raise
        raise torch.OutOfMemoryError(
            f"out of device memory receiving tensors[{index}] ({view.numel()} bytes) from "
            "the other process of the job: the job's tensors do not fit this GPU's free memory"
        ) from e


def receive_device_arena(sock: socket.socket, declared: Any, device: torch.device) -> devmem.Block:
    """The peer's new device arena: one descriptor right after the frame (after the host
    arena's), an exported CUDA allocation of at least the declared size, mapped read-only."""
    size = _declared_size(declared, "device_arena", DEVICE_ARENA_MAX)
    if device.type != "cuda":
        raise ProtocolError("the peer sent a device arena and this side has no GPU")
    fd = _recv_one_fd(sock, "device arena")
    try:
        return devmem.import_fd(device, fd, size)
    except devmem.DeviceMemoryError as e:
        raise ProtocolError(f"the device arena cannot be mapped: {e}") from e
    finally:
        os.close(fd)


def receive_arena(sock: socket.socket, declared: Any) -> _Arena:
    """The peer's new arena: one descriptor right after the frame, a memfd sealed against
    resizes (so it cannot shrink under the mapping) of the declared size, mapped read-only."""
    size = _declared_size(declared, "arena", ARENA_MAX_BYTES)
    fd = _recv_one_fd(sock, "arena")
    try:
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            actual = os.fstat(fd).st_size
        except OSError as e:
            raise ProtocolError(f"the arena descriptor is not a memfd: {e}") from e
        resize = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
        if seals & resize != resize:
            raise ProtocolError("the arena is not sealed against resizes")
        if actual != size:
            raise ProtocolError(f"the arena holds {actual} bytes, not {size}")
        mm = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    # torch wants writable memory and warns: the mapping is read-only, and only slices of it
    # are ever copied out (from_arena's callers), never written.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        view = torch.from_numpy(np.frombuffer(mm, dtype=np.uint8))
    return _Arena(size, view)


def _declared_size(declared: Any, key: str, limit: int) -> int:
    size = declared.get("size") if isinstance(declared, dict) else None
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= limit:
        raise ProtocolError(f"'{key}.size' must be an integer from 1 to {limit}")
    return size


def _recv_one_fd(sock: socket.socket, what: str) -> int:
    """The one descriptor of a one-byte message (the caller closes it)."""
    data, got, flags, _ = socket.recv_fds(sock, 1, 1)
    if not data or flags & socket.MSG_CTRUNC or len(got) != 1:
        for fd in got:
            os.close(fd)
        if not data:
            raise ProtocolError(f"the peer closed the connection before its {what}")
        raise ProtocolError(f"expected 1 {what} descriptor, got {len(got)}")
    return got[0]


def from_arena(
    arena: _Arena | devmem.Block | None, offset: int, nbytes: int, index: int
) -> torch.Tensor:
    if arena is None:
        raise ProtocolError(f"tensors[{index}] is in an arena the peer never sent")
    if offset < 0 or offset + nbytes > arena.size:
        raise ProtocolError(
            f"tensors[{index}] (offset {offset}, {nbytes} bytes) is outside the arena "
            f"of {arena.size} bytes"
        )
    return arena.view[offset : offset + nbytes]


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got : got + _CHUNK])
        if n == 0:
            raise ProtocolError("the peer closed the connection inside a tensor")
        got += n
