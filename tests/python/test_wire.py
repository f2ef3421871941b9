"""wire.py: values and tensors across the judge <-> candidate socket, inline bytes and sealed
memfds, and the peers that lie about them."""

from __future__ import annotations

import fcntl
import gc
import mmap
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from kforge_worker.candidate import arena, wire
from kforge_worker.core.protocol import ProtocolError, StreamChannel

CPU = torch.device("cpu")
BUDGET = 1 << 30


@pytest.fixture
def pair() -> Iterator[tuple[StreamChannel, StreamChannel]]:
    a, b = socket.socketpair()
    with a, b:
        yield StreamChannel(a), StreamChannel(b)


def round_trip(
    pair: tuple[StreamChannel, StreamChannel], values: Any, device: torch.device = CPU
) -> tuple[dict, Any]:
    sender, receiver = pair
    thread = threading.Thread(target=wire.send, args=(sender, {"type": "t"}, values))
    thread.start()
    try:
        return wire.receive(receiver, device, BUDGET)
    finally:
        thread.join()


def test_small_and_large_tensors_and_plain_values_round_trip(pair) -> None:
    small = torch.arange(10, dtype=torch.int32)
    large = torch.randn(1 << 19)  # 2 MiB: over FD_MIN_BYTES
    strided = torch.randn(512, 1024).t()  # not contiguous, 2 MiB
    values = {"a": [small, large, (strided, 3.5, float("nan"))], "b": None, "c": "text"}
    message, got = round_trip(pair, values)
    vias = [spec.get("via", "bytes") for spec in message["tensors"]]
    assert vias == ["bytes", "fd", "fd"]  # host tensors: memfds, mapped without a copy
    assert torch.equal(got["a"][0], small) and torch.equal(got["a"][1], large)
    assert torch.equal(got["a"][2][0], strided) and got["a"][2][1] == 3.5
    assert got["a"][2][2] != got["a"][2][2] and got["b"] is None and got["c"] == "text"


def test_a_received_memfd_tensor_is_a_private_writable_copy(pair) -> None:
    large = torch.zeros(1 << 19)
    _, got = round_trip(pair, [large])
    got[0].fill_(7.0)  # copy-on-write: the receiver may scribble on its copy
    assert float(got[0].sum()) == 7.0 * (1 << 19) and float(large.sum()) == 0.0


def test_many_large_tensors_travel_in_several_descriptor_messages(pair) -> None:
    tensors = [torch.full((1 << 18,), float(i)) for i in range(wire.FDS_PER_MESSAGE + 5)]
    message, got = round_trip(pair, tensors)
    assert all(spec.get("via") == "fd" for spec in message["tensors"])
    assert [float(t[0]) for t in got] == [float(i) for i in range(len(tensors))]


def test_the_bytes_stay_inline_when_a_memfd_cannot_be_made(pair, monkeypatch) -> None:
    def refuse(_t: torch.Tensor) -> int:
        raise OSError(27, "File too large")  # what ftruncate says over RLIMIT_FSIZE

    monkeypatch.setattr(wire, "_sealed_memfd", refuse)
    large = torch.randn(1 << 19)
    message, got = round_trip(pair, [large])
    assert "via" not in message["tensors"][0] and torch.equal(got[0], large)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def send_raw(sock: socket.socket, specs: list[dict[str, Any]], fds: list[int]) -> None:
    values = {"$list": [{"$t": i} for i in range(len(specs))]}
    StreamChannel(sock).send({"type": "t", "values": values, "tensors": specs})
    if fds:
        socket.send_fds(sock, [b"F"], fds)


FD_SPEC = {"dtype": "float32", "shape": [1024], "nbytes": 4096, "via": "fd"}


def send_by_fd(sock: socket.socket, specs: list[dict[str, Any]], fds: list[int]) -> None:
    """send_raw, then closes the sender's copies of `fds` (the receiver has its own)."""
    try:
        send_raw(sock, specs, fds)
    finally:
        for fd in fds:
            os.close(fd)


def memfd(size: int, seals: int) -> int:
    fd = os.memfd_create("test", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


ALL_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


@pytest.mark.parametrize(
    ("seals", "size", "error"),
    [
        (0, 4096, "not sealed"),
        (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW, 4096, "not sealed"),  # still writable
        (ALL_SEALS, 8192, "holds 8192 bytes, not 4096"),
    ],
)
def test_a_memfd_not_sealed_or_of_another_size_is_refused(pair, seals, size, error) -> None:
    sender, receiver = pair
    before = open_fds()
    send_by_fd(sender.socket, [FD_SPEC], [memfd(size, seals)])
    with pytest.raises(ProtocolError, match=error):
        wire.receive(receiver, CPU, BUDGET)
    assert open_fds() == before  # the receiver closed what it got


def test_a_file_that_is_no_memfd_is_refused(pair, tmp_path) -> None:
    sender, receiver = pair
    path = tmp_path / "plain"
    path.write_bytes(b"\0" * 4096)
    send_by_fd(sender.socket, [FD_SPEC], [os.open(path, os.O_RDONLY)])
    with pytest.raises(ProtocolError, match=r"not a memfd|not sealed"):
        wire.receive(receiver, CPU, BUDGET)


def test_fewer_descriptors_than_declared_is_refused(pair) -> None:
    sender, receiver = pair
    send_by_fd(sender.socket, [FD_SPEC, FD_SPEC], [memfd(4096, ALL_SEALS)])
    with pytest.raises(ProtocolError, match="expected 2 tensor descriptor"):
        wire.receive(receiver, CPU, BUDGET)


def test_more_descriptors_than_declared_are_refused_and_closed(pair) -> None:
    sender, receiver = pair
    before = open_fds()
    send_by_fd(sender.socket, [FD_SPEC], [memfd(4096, ALL_SEALS) for _ in range(3)])
    with pytest.raises(ProtocolError, match="expected 1 tensor descriptor"):
        wire.receive(receiver, CPU, BUDGET)
    assert open_fds() == before


def test_an_unknown_transport_and_a_tensor_over_budget_are_refused(pair) -> None:
    sender, receiver = pair
    send_raw(sender.socket, [{"dtype": "float32", "shape": [4], "nbytes": 16, "via": "shm"}], [])
    with pytest.raises(ProtocolError, match="via must be"):
        wire.receive(receiver, CPU, BUDGET)
    sender2, receiver2 = pair
    spec = {"dtype": "float32", "shape": [1 << 20], "nbytes": 4 << 20, "via": "fd"}
    send_raw(sender2.socket, [spec], [])
    with pytest.raises(ProtocolError, match="more than"):
        wire.receive(receiver2, CPU, 1 << 20)


@pytest.mark.parametrize("staging", [1000, 2500, 4096])
def test_a_device_tensor_is_staged_chunk_by_chunk(monkeypatch, staging: int) -> None:
    # The staging path as a GPU sender runs it, on a "device" tensor (meta device: only its
    # type is read before the copy, which goes through a host stand-in here).
    monkeypatch.setattr(arena, "_STAGING", [torch.zeros(staging, dtype=torch.uint8)])
    src = torch.randint(0, 255, (2500,), dtype=torch.uint8)

    class OnDevice:
        device = torch.device("meta")

        def numel(self) -> int:
            return src.numel()

        def __getitem__(self, key: slice) -> torch.Tensor:
            return src[key]

    got = bytearray(2500)
    offsets = []
    for offset, chunk in arena.host_chunks(OnDevice()):  # type: ignore[arg-type]
        offsets.append(offset)
        got[offset : offset + chunk.numel()] = bytes(chunk.tolist())
    assert got == bytes(src.tolist())
    assert offsets == list(range(0, 2500, staging))


def test_without_pinned_memory_a_device_tensor_is_copied_whole(monkeypatch) -> None:
    monkeypatch.setattr(arena, "_STAGING", [None])
    src = torch.arange(3000, dtype=torch.int32).view(torch.uint8)
    chunks = list(arena.host_chunks(src))
    assert len(chunks) == 1 and chunks[0][0] == 0 and torch.equal(chunks[0][1], src)


@pytest.fixture
def arena_for_host_tensors(monkeypatch) -> None:
    """The arena as a GPU sender uses it (device tensors), for host tensors here."""
    monkeypatch.setattr(wire, "wants_arena", lambda tensors: True)


def test_device_tensors_go_through_the_arena_host_tensors_as_memfds() -> None:
    assert not arena.wants_arena([torch.zeros(4)])
    assert arena.wants_arena([torch.zeros(4, device="meta")])


def test_the_arena_is_sent_once_and_reused_then_replaced_when_too_small(
    pair, arena_for_host_tensors
) -> None:
    # Each message's large tensors are written into the sender's arena; its descriptor goes
    # along only with the first message and when a larger one replaces it, and every value
    # received is the receiver's own copy (the sender writes the arena again).
    first = torch.randn(1 << 19)
    message, got1 = round_trip(pair, [first])
    assert message["arena"]["size"] >= first.numel() * 4
    message, got2 = round_trip(pair, [torch.ones(1 << 19)])
    assert "arena" not in message and message["tensors"][0]["via"] == "arena"
    assert torch.equal(got1[0], first) and torch.equal(got2[0], torch.ones(1 << 19))
    bigger = [torch.full((1 << 20,), 2.0), torch.full((1 << 19,), 3.0)]
    message, got3 = round_trip(pair, bigger)
    assert message["arena"]["size"] >= 6 << 20
    assert message["tensors"][1]["offset"] == 4 << 20  # page-aligned, after the first
    assert torch.equal(got3[0], bigger[0]) and torch.equal(got3[1], bigger[1])


def test_an_arena_that_cannot_be_made_falls_back_to_memfds(
    pair, monkeypatch, arena_for_host_tensors
) -> None:
    def refuse(_size: int) -> Any:
        raise OSError(27, "File too large")

    monkeypatch.setattr(arena, "_new_arena", refuse)
    large = torch.randn(1 << 19)
    message, got = round_trip(pair, [large])
    assert message["tensors"][0]["via"] == "fd" and torch.equal(got[0], large)


ARENA_SPEC = {"dtype": "float32", "shape": [1024], "nbytes": 4096, "via": "arena", "offset": 0}


def send_arena(
    sock: socket.socket,
    specs: list[dict[str, Any]],
    arena: dict | None,
    fd: int | None,
    key: str = "arena",
) -> None:
    """A frame declaring `specs` and, with `arena`, a new arena under `key` ("arena" or
    "device_arena"), then `fd` (closed here) in its one-byte message."""
    values = {"$list": [{"$t": i} for i in range(len(specs))]}
    message: dict[str, Any] = {"type": "t", "values": values, "tensors": specs}
    if arena is not None:
        message[key] = arena
    StreamChannel(sock).send(message)
    if fd is not None:
        try:
            socket.send_fds(sock, [b"A" if key == "arena" else b"D"], [fd])
        finally:
            os.close(fd)


RESIZE = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


@pytest.mark.parametrize(
    ("seals", "declared", "spec", "error"),
    [
        (0, 8192, ARENA_SPEC, "not sealed against resizes"),  # could shrink under the mapping
        (fcntl.F_SEAL_GROW, 8192, ARENA_SPEC, "not sealed against resizes"),
        (RESIZE, 4096, ARENA_SPEC, "holds 8192 bytes, not 4096"),
        (RESIZE, 1 << 40, ARENA_SPEC, "'arena.size' must be an integer"),
        (RESIZE, 8192, {**ARENA_SPEC, "offset": 6144}, "outside the arena"),
        (RESIZE, 8192, {**ARENA_SPEC, "offset": -4}, "outside the arena"),
        (RESIZE, 8192, {**ARENA_SPEC, "offset": "0"}, "offset must be an integer"),
    ],
)
def test_a_hostile_arena_is_refused(pair, seals, declared, spec, error) -> None:
    sender, receiver = pair
    before = open_fds()
    fd = memfd(8192, seals)
    send_arena(sender.socket, [spec], {"size": declared}, fd)
    with pytest.raises(ProtocolError, match=error):
        wire.receive(receiver, CPU, BUDGET)
    # The descriptor received was closed; an arena accepted before a tensor was refused keeps
    # one (Python's mmap holds a duplicate) until the channel's arena is let go.
    arena._ARENAS.pop(receiver, None)
    gc.collect()
    assert open_fds() == before


def test_an_arena_tensor_before_any_arena_and_a_plain_file_are_refused(pair, tmp_path) -> None:
    sender, receiver = pair
    send_arena(sender.socket, [ARENA_SPEC], None, None)
    with pytest.raises(ProtocolError, match="arena the peer never sent"):
        wire.receive(receiver, CPU, BUDGET)
    path = tmp_path / "plain"
    path.write_bytes(bytes(8192))
    send_arena(sender.socket, [ARENA_SPEC], {"size": 8192}, os.open(path, os.O_RDWR))
    with pytest.raises(ProtocolError, match="not a memfd"):
        wire.receive(receiver, CPU, BUDGET)


def test_writes_to_the_arena_after_receipt_do_not_reach_the_received_value(pair) -> None:
    # A hostile sender may write its arena whenever it likes: what the receiver got is a copy.
    sender, receiver = pair
    fd = memfd(8192, 0)
    mm = mmap.mmap(fd, 8192)
    mm[:4096] = bytes(range(256)) * 16
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, RESIZE)
    send_arena(sender.socket, [ARENA_SPEC], {"size": 8192}, fd)
    _, got = wire.receive(receiver, CPU, BUDGET)
    kept = got[0].clone()
    mm[:4096] = bytes(4096)
    assert torch.equal(got[0].view(torch.uint8), kept.view(torch.uint8))
    assert bool(got[0].view(torch.uint8).any())
    mm.close()


def test_large_tensors_over_the_arenas_limit_travel_as_memfds(
    pair, monkeypatch, arena_for_host_tensors
) -> None:
    monkeypatch.setattr(arena, "ARENA_MAX_BYTES", 1 << 20)
    large = torch.randn(1 << 19)  # 2 MiB
    message, got = round_trip(pair, [large])
    assert "arena" not in message and message["tensors"][0]["via"] == "fd"
    assert torch.equal(got[0], large)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_tensors_round_trip_through_the_host_arena(pair, monkeypatch) -> None:
    sender, receiver = pair
    device = torch.device("cuda:0")
    monkeypatch.setitem(arena._SHARING, device, False)  # as where the driver cannot export
    for n in (1 << 19, 1 << 21, 1 << 20):  # the second replaces the arena, the third reuses it
        values = [torch.randn(n, device=device), torch.arange(n, device=device)]
        thread = threading.Thread(target=wire.send, args=(sender, {"type": "t"}, values))
        thread.start()
        message, got = wire.receive(receiver, device, BUDGET)
        thread.join()
        assert [spec["via"] for spec in message["tensors"]] == ["arena", "arena"]
        assert got[0].device == device and torch.equal(got[0], values[0])
        assert torch.equal(got[1], values[1])


GPU = torch.device("cuda:0")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
DEVICE_SPEC = {**ARENA_SPEC, "via": "device"}


def gpu_round_trip(pair: tuple[StreamChannel, StreamChannel], values: Any) -> tuple[dict, Any]:
    return round_trip(pair, values, GPU)


@needs_gpu
def test_gpu_tensors_round_trip_through_the_device_arena(pair) -> None:
    assert arena.shares_device(GPU), "this GPU's driver cannot export memory as a descriptor"
    sizes = []
    for n in (1 << 19, 1 << 21, 1 << 20):  # the second replaces the arena, the third reuses it
        values = [torch.randn(n, device=GPU), torch.arange(n, device=GPU), torch.randn(n // 2)]
        message, got = gpu_round_trip(pair, values)
        assert [spec["via"] for spec in message["tensors"]] == ["device", "device", "fd"]
        sizes.append(message.get("device_arena", {}).get("size"))
        assert all(g.device == GPU for g in got)
        assert all(torch.equal(g.cpu(), v.cpu()) for g, v in zip(got, values, strict=True))
    assert sizes[0] and sizes[1] > sizes[0] and sizes[2] is None
    # What the receiver got is its own copy: the sender writing its arena changes nothing.
    kept = [g.clone() for g in got]
    arena.arena_state(pair[0]).device_mine.view.fill_(0)
    torch.cuda.synchronize()
    assert all(torch.equal(g, k) for g, k in zip(got, kept, strict=True))


@needs_gpu
def test_a_device_arena_above_the_keep_size_serves_one_message(pair, monkeypatch) -> None:
    assert arena.keep_bytes(GPU) >= max(arena.DEVICE_ARENA_KEEP_BYTES, 1 << 30)
    monkeypatch.setattr(arena, "keep_bytes", lambda device: 4 << 20)
    sender, receiver = pair
    for _ in range(2):
        values = [torch.randn(4 << 20, device=GPU)]  # 16 MiB: above the keep size
        message, got = gpu_round_trip(pair, values)
        assert message["device_arena"]["size"] >= 16 << 20  # a new arena every time
        assert torch.equal(got[0], values[0])
        # The receiver unmapped it at once; the sender keeps it until the peer answers.
        assert arena.arena_state(receiver).device_peer is None
        used = arena.arena_state(sender).device_mine
        assert used is not None and not used._closed
        round_trip((receiver, sender), "answer", GPU)  # the peer answers
        assert used._closed and arena.arena_state(sender).device_mine is None
    small = [torch.randn(1 << 18, device=GPU)]  # 1 MiB (a 2 MiB arena): kept
    first, _ = gpu_round_trip(pair, small)
    again, got = gpu_round_trip(pair, small)
    assert "device_arena" in first and "device_arena" not in again
    assert torch.equal(got[0], small[0])


def send_device_arena(sock: socket.socket, specs: list[dict], arena: dict | None, fd: int | None):
    send_arena(sock, specs, arena, fd, key="device_arena")


def test_a_device_tensor_or_arena_at_a_receiver_without_a_gpu_is_refused(pair) -> None:
    sender, receiver = pair
    send_device_arena(sender.socket, [DEVICE_SPEC], None, None)
    with pytest.raises(ProtocolError, match="device memory and this side has no GPU"):
        wire.receive(receiver, CPU, BUDGET)
    send_device_arena(sender.socket, [], {"size": 1 << 21}, memfd(8192, RESIZE))
    with pytest.raises(ProtocolError, match="device arena and this side has no GPU"):
        wire.receive(receiver, CPU, BUDGET)


@pytest.mark.parametrize("declared", [0, -1, True, "2097152", 1 << 41])
def test_a_device_arena_of_a_bad_size_is_refused(pair, declared) -> None:
    sender, receiver = pair
    send_device_arena(sender.socket, [], {"size": declared}, None)
    with pytest.raises(ProtocolError, match=r"'device_arena\.size' must be an integer"):
        wire.receive(receiver, GPU, BUDGET)


@needs_gpu
def test_a_hostile_device_arena_is_refused(pair) -> None:
    sender, receiver = pair
    torch.empty(0, device=GPU)  # the driver's own descriptors are open before counting
    before = open_fds()
    # A descriptor that is no CUDA allocation.
    send_device_arena(sender.socket, [DEVICE_SPEC], {"size": 1 << 21}, memfd(8192, RESIZE))
    with pytest.raises(ProtocolError, match="device arena cannot be mapped"):
        wire.receive(receiver, GPU, BUDGET)
    # An allocation smaller than declared: mapping past its end fails.
    block = arena.devmem.allocate(GPU, 1 << 21)
    send_device_arena(sender.socket, [DEVICE_SPEC], {"size": 4 << 21}, block.export())
    with pytest.raises(ProtocolError, match="device arena cannot be mapped"):
        wire.receive(receiver, GPU, BUDGET)
    # A tensor before any arena, then offsets outside the one sent.
    send_device_arena(sender.socket, [DEVICE_SPEC], None, None)
    with pytest.raises(ProtocolError, match="arena the peer never sent"):
        wire.receive(receiver, GPU, BUDGET)
    for offset in ((1 << 21) - 2048, -4):
        spec = {**DEVICE_SPEC, "offset": offset}
        send_device_arena(sender.socket, [spec], {"size": 1 << 21}, block.export())
        with pytest.raises(ProtocolError, match="outside the arena"):
            wire.receive(receiver, GPU, BUDGET)
    block.close()
    state = arena._ARENAS.pop(receiver, None)
    if state is not None and state.device_peer is not None:
        state.device_peer.close()
    assert open_fds() == before


@needs_gpu
@pytest.mark.parametrize(("code", "tries", "still_shared"), [(1, 1, False), (2, 2, True)])
def test_a_device_arena_the_driver_refuses_falls_back_to_the_host_arena(
    pair, monkeypatch, code: int, tries: int, still_shared: bool
) -> None:
    # Not supported (CUresult 1, say): asked once, then never again in this process. Out of
    # memory (2): torch's cache is emptied and it is asked again; still out, this message
    # goes through host memory and the next one asks again.
    calls = []

    def refuse(_device: torch.device, _nbytes: int) -> Any:
        calls.append(1)
        raise arena.devmem.DeviceMemoryError(f"cuMemCreate failed with CUresult {code}", code)

    monkeypatch.setattr(arena.devmem, "allocate", refuse)
    monkeypatch.setitem(arena._SHARING, GPU, True)
    values = [torch.randn(1 << 19, device=GPU)]
    message, got = gpu_round_trip(pair, values)
    assert message["tensors"][0]["via"] == "arena" and torch.equal(got[0], values[0])
    assert len(calls) == tries and arena._SHARING[GPU] is still_shared


def test_a_jailed_out_of_memory_assert_is_recognised_as_out_of_memory():
    from kforge_worker.core.devinfo import is_device_oom

    jailed = RuntimeError(
        'NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at "/pytorch/'
        'c10/cuda/CUDACachingAllocator.cpp":1135, please report a bug to PyTorch.'
    )
    assert is_device_oom(jailed)
    assert is_device_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert not is_device_oom(RuntimeError("CUDA error: an illegal memory access"))


def test_an_out_of_memory_traceback_from_the_other_process_is_recognised():
    from kforge_worker.core.devinfo import is_device_oom_text

    assert is_device_oom_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert is_device_oom_text(
        "RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED "
        'at "/pytorch/c10/cuda/CUDACachingAllocator.cpp":1135'
    )
    assert not is_device_oom_text("RuntimeError: CUDA error: an illegal memory access")


def test_a_single_use_arenas_sender_empties_its_cache_only_when_the_peer_lacks_room(monkeypatch):
    # Judge and candidate share one GPU: the receiver of a GB-sized message cannot free what
    # the sender's allocator keeps cached, so the sender does when free memory is short.
    free = [0]
    emptied: list[int] = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free[0], 80 << 30))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(free[0]))
    need = 17 << 30
    free[0] = need + arena.PEER_HEADROOM_BYTES
    arena._make_room_for_peer(torch.device("cuda:0"), need)
    assert emptied == []
    free[0] = need + arena.PEER_HEADROOM_BYTES - 1
    arena._make_room_for_peer(torch.device("cuda:0"), need)
    assert emptied == [free[0]]


def test_release_cached_gives_back_only_a_cache_above_the_kept_arena_size(monkeypatch):
    gpu = torch.device("cuda:0")
    monkeypatch.setattr(arena, "keep_bytes", lambda device: 5 << 30)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 1 << 30)
    reserved = [0]
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved[0])
    emptied: list[int] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(reserved[0]))
    reserved[0] = 6 << 30  # 5 GiB idle: kept
    arena.release_cached(gpu)
    assert emptied == []
    reserved[0] = (6 << 30) + 1
    arena.release_cached(gpu)
    assert emptied == [reserved[0]]
    arena.release_cached(torch.device("cpu"))  # nothing to give back there
    assert len(emptied) == 1


def test_a_call_reply_must_name_the_changed_inputs_and_send_none_back():
    # The candidate compares a call's read-only inputs itself; the judge no longer takes the
    # inputs back instead (a reply of that older form is a protocol error).
    import socket
    import subprocess

    from kforge_worker.judge.link import CandidateGone, CandidateLink

    ours, _theirs = socket.socketpair()
    for reply, values in (
        ({"outputs": []}, [[], []]),  # no read_only_changed
        ({"outputs": [], "read_only_changed": "x"}, [[], []]),  # not a list
        ({"outputs": [], "read_only_changed": []}, [[], [torch.zeros(2)]]),  # inputs sent back
    ):
        proc = subprocess.Popen(["sleep", "30"])
        link = CandidateLink(ours, proc.pid, torch.device("cpu"))
        with pytest.raises(CandidateGone, match="read_only_changed"):
            link._call_reply(reply, values)
        proc.wait(timeout=5)
    link = CandidateLink(ours, 0, torch.device("cpu"))
    out = link._call_reply(
        {"outputs": [{"name": "out"}], "read_only_changed": ["x"]}, [[torch.ones(1)], []]
    )
    assert out.read_only_changed == ["x"] and out.outputs[0][0] == "out"


def test_a_jailed_candidates_out_of_memory_is_reported_as_out_of_memory():
    """The candidate's traceback of a jailed out-of-memory names no memory (torch's
    allocator asserts on NVML instead): the result says what happened."""
    from kforge_worker.judge.correctness import report_exception
    from kforge_worker.judge.kernels import RemoteError
    from kforge_worker.judge.results import JobResult

    result = JobResult(compiled=True)
    text = (
        "Traceback (most recent call last):\nRuntimeError: NVML_SUCCESS == DriverAPI::get()->"
        'nvmlInit_v2_() INTERNAL ASSERT FAILED at "/pytorch/c10/cuda/CUDACachingAllocator.cpp"'
    )
    report_exception(result, RemoteError(text), "trial 1/5")
    assert result.error_kind == "runtime"
    assert "ran out of device memory" in (result.runtime_error or "")
    plain = JobResult(compiled=True)
    report_exception(plain, RemoteError("RuntimeError: boom"), "trial 1/5")
    assert "memory" not in (plain.runtime_error or "")
