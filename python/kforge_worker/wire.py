"""Values across the judge <-> candidate socket (docs/worker-protocol.md "Candidate protocol").

A message is one JSON frame (protocol.StreamChannel) whose `values` use the encoding below,
followed by the raw bytes of every tensor it references, in order, with no framing of their
own: the header says how many bytes each one has.

    tensor           {"$t": i}             i indexes header["tensors"]: {"dtype","shape","nbytes"}
    list / tuple     {"$list": [...]} / {"$tuple": [...]}
    dict (str keys)  {"$dict": {...}}
    finite float, int, bool, str, None      {"$v": value}
    non-finite float {"$f": "nan" | "inf" | "-inf"}
    anything else    {"$other": "<type name>"} (decodes to an Unsupported marker)

Tensors travel as the contiguous little-endian bytes of a host copy; the receiver checks that
the declared size matches dtype x shape and stays under its byte budget before it reads a
single byte, so a peer cannot make it allocate what it did not agree to.

A tensor of FD_MIN_BYTES or more travels as a file descriptor instead (its spec says
`"via": "fd"`): the sender writes the bytes into a memfd, seals it against writes and resizes
(F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) and passes it with SCM_RIGHTS, at
most FDS_PER_MESSAGE per one-byte message right after the frame (the inline bytes, if any,
follow those). The receiver takes exactly as many descriptors as the specs declare, refuses one
that is not sealed so or whose size is not the declared one, and maps it privately
(copy-on-write): a sealed memfd cannot change under the receiver, so what it checks is what it
uses. Socket streaming moved 0.15-0.2 GiB/s here; a memfd costs one copy on each side (from
a GPU, through a pinned staging buffer: bench/wire_throughput.py).

Device tensors go through the sender's arena instead, while a message's large tensors take at
most ARENA_MAX_BYTES: one memfd per side, sealed against resizes (and against writable
mappings but the sender's own, where the kernel has F_SEAL_FUTURE_WRITE), passed once after
the frame that first uses it (`"arena": {"size"}`, one descriptor in a one-byte message before
any per-tensor ones) and again only when a larger one replaces it. The sender writes each
message's tensors into it at page-aligned offsets (`"via": "arena", "offset"`), so its pages
are allocated once, not per message; the receiver maps the peer's arena read-only, checks
every offset against its size, and copies each tensor out at once (onto its device), so later
writes to the arena, by an honest sender's next message or a hostile one at any time, never
reach a value it received. The protocol is request/response, so an honest sender writes its
arena again only after the peer has read the last message.

Where the driver can export GPU memory as a descriptor (devmem.py), a large CUDA tensor goes
through the sender's **device arena** instead (`"via": "device", "offset"`): one exportable
allocation per side on the GPU, passed once (`"device_arena": {"size"}`, one descriptor in a
one-byte message after the host arena's) and again only when a larger one replaces it. The
sender copies device to device into it and synchronizes before the frame leaves; the receiver
maps the peer's arena read-only (mapping more than the peer allocated fails), checks each
offset against the declared size, clones every tensor out at once and synchronizes before it
returns, so nothing it received aliases memory the peer can write. A GB-sized tensor then
costs two device copies (milliseconds) instead of two trips through host memory (seconds).

A device arena larger than 1/16 of the GPU's memory (at least DEVICE_ARENA_KEEP_BYTES) serves
one message only, so a job with GB-sized tensors does not hold an extra copy of them on each
side for its whole life (on an 80 GB H100, KernelBench's 8.6 GB L1Norm did not fit with
them): the receiver unmaps it once it has copied the tensors out, and the sender releases it
when the peer's next message arrives (the protocol is request/response: the peer has read it
by then). The sender's next message that goes through the device makes a new arena and passes
its descriptor. Before such a message goes out, the sender gives torch's cached blocks back
to the driver only when the GPU's free memory is short of the message plus PEER_HEADROOM_BYTES
(the receiver cannot free what the sender's allocator holds); doing it after every such
message was tried on the H100 and made level 1 slower.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
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

from kforge_worker import devmem, inputs
from kforge_worker.devinfo import is_device_oom
from kforge_worker.protocol import ProtocolError, StreamChannel

# Every dtype a request may declare, and what a kernel may also return.
DTYPES: dict[str, torch.dtype] = {
    **inputs.DTYPES,
    "uint8": torch.uint8,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
NAMES = {v: k for k, v in DTYPES.items()}
_CHUNK = 1 << 24
FD_MIN_BYTES = 1 << 20  # tensors this large travel as a sealed memfd
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
FDS_PER_MESSAGE = 200  # under the kernel's SCM_MAX_FD (253)
_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


@dataclass(frozen=True)
class Unsupported:
    """A value the peer could not encode (its type name)."""

    type_name: str


def dtype_name(dtype: torch.dtype) -> str:
    return NAMES.get(dtype, str(dtype).removeprefix("torch."))


def encode(value: Any, tensors: list[torch.Tensor]) -> Any:
    """The JSON form of `value`; tensors are appended to `tensors` and referenced by index."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"$t": len(tensors) - 1}
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return {"$v": value}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"$v": value}
        return {"$f": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return {"$list": [encode(v, tensors) for v in value]}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, tensors) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$dict": {k: encode(v, tensors) for k, v in value.items()}}
    return {"$other": type(value).__qualname__}


def decode(obj: Any, tensors: list[torch.Tensor], depth: int = 0) -> Any:
    """Inverse of encode(). Raises ProtocolError on a malformed value."""
    if depth > 64 or not isinstance(obj, dict) or len(obj) != 1:
        raise ProtocolError("malformed encoded value")
    ((tag, body),) = obj.items()
    if tag == "$t":
        if not isinstance(body, int) or not 0 <= body < len(tensors):
            raise ProtocolError(f"tensor reference {body!r} out of range")
        return tensors[body]
    if tag == "$v":
        return body
    if tag == "$f":
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(body, math.nan)
    if tag in ("$list", "$tuple"):
        if not isinstance(body, list):
            raise ProtocolError("malformed list")
        items = [decode(v, tensors, depth + 1) for v in body]
        return items if tag == "$list" else tuple(items)
    if tag == "$dict":
        if not isinstance(body, dict):
            raise ProtocolError("malformed dict")
        return {str(k): decode(v, tensors, depth + 1) for k, v in body.items()}
    if tag == "$other":
        return Unsupported(str(body))
    raise ProtocolError(f"unknown value tag {tag!r}")


def _tensor_bytes(t: torch.Tensor) -> torch.Tensor:
    """`t`'s bytes as a flat uint8 tensor on its own device (contiguous, no host copy)."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _sealed_memfd(t: torch.Tensor) -> int:
    """A memfd holding `t`'s bytes, sealed against writes and resizes (the caller closes it)."""
    src = _tensor_bytes(t)
    fd = os.memfd_create("kforge-tensor", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, src.numel())  # over the jail's RLIMIT_FSIZE: OSError here
        for offset, chunk in _host_chunks(src):
            _pwrite_all(fd, chunk.numpy().data, offset)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _host_chunks(src: torch.Tensor) -> Iterator[tuple[int, torch.Tensor]]:
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


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def send(channel: StreamChannel, header: dict[str, Any], values: Any = None) -> None:
    """Sends `header` with `values` encoded under header["values"], then the tensors: large
    ones through this side's arena or as sealed memfds, the rest as bytes (module docstring)."""
    tensors: list[torch.Tensor] = []
    message = dict(header)
    message["values"] = encode(values, tensors)
    specs: list[dict[str, Any]] = []
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        specs.append({"dtype": dtype_name(t.dtype), "shape": list(t.shape), "nbytes": nbytes})
    large = [i for i, spec in enumerate(specs) if spec["nbytes"] >= FD_MIN_BYTES]
    fds: list[int] = []
    arena_fd: int | None = None
    device_fd: int | None = None
    try:
        on_gpu = [i for i in large if _shares_device(tensors[i].device)]
        placed_on_gpu = _place_on_device(channel, [tensors[i] for i in on_gpu]) if on_gpu else None
        if placed_on_gpu is not None:
            device_fd = _note_placed(message, specs, on_gpu, placed_on_gpu, "device")
            large = [i for i in large if i not in on_gpu]
        if large:
            chosen = [tensors[i] for i in large]
            placed = _place_in_arena(channel, chosen) if _wants_arena(chosen) else None
            if placed is not None:
                arena_fd = _note_placed(message, specs, large, placed, "arena")
            else:
                for i in large:
                    try:
                        fds.append(_sealed_memfd(tensors[i]))
                        specs[i]["via"] = "fd"
                    except OSError:  # e.g. over the jail's RLIMIT_FSIZE: the bytes go inline
                        pass
        message["tensors"] = specs
        channel.send(message)
        sock = channel.socket
        if arena_fd is not None:
            socket.send_fds(sock, [b"A"], [arena_fd])
        if device_fd is not None:
            socket.send_fds(sock, [b"D"], [device_fd])
        for i in range(0, len(fds), FDS_PER_MESSAGE):
            socket.send_fds(sock, [b"F"], fds[i : i + FDS_PER_MESSAGE])
        for t, spec in zip(tensors, specs, strict=True):
            if "via" not in spec and spec["nbytes"]:
                sock.sendall(_tensor_bytes(t).cpu().numpy().data)
    finally:
        for fd in [*fds, *(f for f in (arena_fd, device_fd) if f is not None)]:
            os.close(fd)


def _note_placed(
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


def _arena_state(channel: StreamChannel) -> _ArenaState:
    state = _ARENAS.get(channel)
    if state is None:
        state = _ARENAS[channel] = _ArenaState()
    return state


def _wants_arena(tensors: list[torch.Tensor]) -> bool:
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


def _place_in_arena(
    channel: StreamChannel, tensors: list[torch.Tensor]
) -> tuple[list[int], int | None, int] | None:
    """Writes `tensors` into this side's arena at page-aligned offsets: (the offsets, the fd
    of a new arena to pass along or None, its size), or None when they take more than
    ARENA_MAX_BYTES or no arena can be made (then they travel as sealed memfds)."""
    offsets, total = _page_offsets(tensors)
    if total > ARENA_MAX_BYTES:
        return None
    state = _arena_state(channel)
    new_fd: int | None = None
    if state.mine is None or state.mine.size < total:
        size = min(ARENA_MAX_BYTES, max(total, 2 * state.mine.size if state.mine else 0))
        try:
            new_fd, arena = _new_arena(size)
        except OSError:
            return None
        state.mine = arena
    for t, offset in zip(tensors, offsets, strict=True):
        for at, chunk in _host_chunks(_tensor_bytes(t)):
            state.mine.view[offset + at : offset + at + chunk.numel()].copy_(chunk)
    return offsets, new_fd, state.mine.size


_SHARING: dict[torch.device, bool] = {}


def _shares_device(device: torch.device) -> bool:
    """Whether tensors on `device` go through the device arena (asked of the driver once)."""
    if device.type != "cuda":
        return False
    if device not in _SHARING:
        _SHARING[device] = devmem.supported(device)
    return _SHARING[device]


def _place_on_device(
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
    state = _arena_state(channel)
    new_fd: int | None = None
    mine = state.device_mine
    if mine is None or mine.size < total or _single_use(mine):
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
        src = _tensor_bytes(t)
        view[offset : offset + src.numel()].copy_(src)
    torch.cuda.synchronize(device)  # the bytes are in place before the peer hears of them
    if _single_use(mine):
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


def _single_use(block: devmem.Block) -> bool:
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


def receive(
    channel: StreamChannel, device: torch.device, budget_bytes: int
) -> tuple[dict[str, Any], Any]:
    """The next message and its decoded values (tensors placed on `device`). Raises
    ProtocolError when the peer hung up, declared a tensor inconsistently or over budget."""
    message = channel.recv()
    if message is None:
        raise ProtocolError("the peer closed the connection")
    _release_single_use(_arena_state(channel))
    specs = message.get("tensors") or []
    if not isinstance(specs, list):
        raise ProtocolError("'tensors' must be a list")
    total = 0
    parsed: list[tuple[torch.dtype, list[int], int, str, int]] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise ProtocolError(f"tensors[{i}] must be an object")
        dtype = DTYPES.get(str(spec.get("dtype")))
        shape = spec.get("shape")
        nbytes = spec.get("nbytes")
        if dtype is None or not isinstance(shape, list) or not isinstance(nbytes, int):
            raise ProtocolError(f"tensors[{i}] is malformed")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ProtocolError(f"tensors[{i}].shape is malformed")
        if nbytes != math.prod(shape) * torch.empty((), dtype=dtype).element_size():
            raise ProtocolError(f"tensors[{i}] declares {nbytes} bytes for its shape and dtype")
        total += nbytes
        if total > budget_bytes:
            raise ProtocolError(f"the peer sent more than {budget_bytes} bytes of tensors")
        via = spec.get("via", "bytes")
        if via not in ("bytes", "fd", "arena", "device"):
            raise ProtocolError(f"tensors[{i}].via must be 'bytes', 'fd', 'arena' or 'device'")
        offset = spec.get("offset", 0)
        if via in ("arena", "device") and (not isinstance(offset, int) or isinstance(offset, bool)):
            raise ProtocolError(f"tensors[{i}].offset must be an integer")
        if via == "device" and device.type != "cuda":
            raise ProtocolError(f"tensors[{i}] is in device memory and this side has no GPU")
        parsed.append((dtype, shape, nbytes, via, offset))
    sock = channel.socket
    state = _arena_state(channel)
    if "arena" in message:
        state.peer = _receive_arena(sock, message["arena"])
    if "device_arena" in message:
        if state.device_peer is not None:
            state.device_peer.close()
            state.device_peer = None
        state.device_peer = _receive_device_arena(sock, message["device_arena"], device)
    mapped = _receive_fds(sock, [nbytes for _, _, nbytes, via, _ in parsed if via == "fd"])
    tensors = []
    for i, (dtype, shape, nbytes, via, offset) in enumerate(parsed):
        if via == "fd":
            raw = mapped.pop(0)
        elif via == "device":
            raw = _clone_out(_from_arena(state.device_peer, offset, nbytes, i), i)
        elif via == "arena":
            raw = _from_arena(state.peer, offset, nbytes, i)
        else:
            raw = torch.empty(nbytes, dtype=torch.uint8)
            if nbytes:
                _recv_exact(sock, raw.numpy().data)
        value = raw.view(dtype).reshape(shape)
        if device.type != "cpu":
            value = value.to(device)
        elif via == "arena":
            value = value.clone()  # the peer may write its arena again: keep a copy of our own
        tensors.append(value)
    if any(via == "device" for _, _, _, via, _ in parsed):
        torch.cuda.synchronize(device)  # copied out before the peer may write its arena again
    if state.device_peer is not None and _single_use(state.device_peer):
        state.device_peer.close()  # a single-use arena: the peer sends a new one next time
        state.device_peer = None
    return message, decode(message.get("values", {"$v": None}), tensors)


def _release_single_use(state: _ArenaState) -> None:
    """The peer has answered, so it has read every arena this side sent: the single-use one
    and those replaced since go back (module docstring)."""
    mine = state.device_mine
    if mine is not None and _single_use(mine):
        state.device_retired.append(mine)
        state.device_mine = None
    for block in state.device_retired:
        block.close()
    state.device_retired.clear()


def _clone_out(view: torch.Tensor, index: int) -> torch.Tensor:
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


def _receive_device_arena(sock: socket.socket, declared: Any, device: torch.device) -> devmem.Block:
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


def _receive_arena(sock: socket.socket, declared: Any) -> _Arena:
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
    # are ever copied out (_from_arena's callers), never written.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        view = torch.from_numpy(np.frombuffer(mm, dtype=np.uint8))
    return _Arena(size, view)


def _declared_size(declared: Any, key: str, limit: int) -> int:
    size = declared.get("size") if isinstance(declared, dict) else None
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= limit:
        raise ProtocolError(f"'{key}.size' must be an integer from 1 to {limit}")
    return size


def send_fds(channel: StreamChannel, header: dict[str, Any], fds: list[int]) -> None:
    """Sends `header`, then `fds` in one one-byte message (the caller keeps and closes them)."""
    channel.send(header)
    socket.send_fds(channel.socket, [b"R"], fds)


def receive_fds(channel: StreamChannel, count: int) -> list[int]:
    """The `count` descriptors that follow a frame sent with send_fds (the caller closes
    them); a peer that sends another number of them breaks the protocol."""
    data, fds, flags, _ = socket.recv_fds(channel.socket, 1, count)
    if len(fds) != count or not data or flags & socket.MSG_CTRUNC:
        for fd in fds:
            os.close(fd)
        raise ProtocolError(f"expected {count} descriptors, got {len(fds)}")
    return list(fds)


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


def _from_arena(
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


def _receive_fds(sock: socket.socket, sizes: list[int]) -> list[torch.Tensor]:
    """The memfd tensors a frame declared (`sizes`, in order), each mapped copy-on-write after
    its seals and size were checked. Every descriptor received is closed here."""
    fds: list[int] = []
    try:
        while len(fds) < len(sizes):
            want = min(FDS_PER_MESSAGE, len(sizes) - len(fds))
            data, got, flags, _ = socket.recv_fds(sock, 1, want)
            fds.extend(got)
            if not data:
                raise ProtocolError("the peer closed the connection before its tensors")
            if flags & socket.MSG_CTRUNC or len(got) != want:
                raise ProtocolError(f"expected {want} tensor descriptor(s), got {len(got)}")
        pairs = enumerate(zip(fds, sizes, strict=True))
        return [_map_sealed(fd, size, i) for i, (fd, size) in pairs]
    finally:
        for fd in fds:
            os.close(fd)


def _map_sealed(fd: int, size: int, index: int) -> torch.Tensor:
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        actual = os.fstat(fd).st_size
    except OSError as e:
        raise ProtocolError(f"tensor descriptor {index} is not a memfd: {e}") from e
    if seals & _SEALS != _SEALS:
        raise ProtocolError(f"tensor descriptor {index} is not sealed against writes and resizes")
    if actual != size:
        raise ProtocolError(f"tensor descriptor {index} holds {actual} bytes, not {size}")
    if size == 0:
        return torch.empty(0, dtype=torch.uint8)
    mm = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return torch.frombuffer(mm, dtype=torch.uint8)  # the tensor keeps the mapping alive


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got : got + _CHUNK])
        if n == 0:
            raise ProtocolError("the peer closed the connection inside a tensor")
        got += n
