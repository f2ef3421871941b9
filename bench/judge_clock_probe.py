"""Where a judge's clock can come from (issues 30, 31, 37): measured on the GPU host before the
timing architecture was chosen. Standalone (torch only, no server), one call:

    python bench/judge_clock_probe.py [--out DIR] [--trials 41]

Parts (each prints its rows; JSON with every sample goes to DIR/judge_clock_probe.json):
- per_process: several fresh processes, one at a time on the GPU, each timing the same
  kernels with the trial protocol (flush, spin, events): does an empty window, or a kernel,
  read differently in different processes (issue 31's bimodal window overhead)?
- bracket: a judge process brackets another process's kernel with its own CUDA events,
  ordered on the device by interprocess events (judge: spin, start event, record A;
  other process: wait A, call, record B; judge: wait B, end event). Its null (empty call)
  and each kernel's bracket minus that null, beside the same kernel timed inside the other
  process (its claim) and inside the judge.
- graph_k: K launches captured in a CUDA graph between one event pair, per launch, beside
  one launch per event window (the flushed protocol).
- startup: what a fresh process pays: import torch, the CUDA context, cuBLAS, Triton.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from typing import Any

SIZES = [12, 16, 20, 24]
MATMUL_N = 4096


def _torch() -> Any:
    import torch

    return torch


class Protocol:
    """The trial protocol of python/kforge_worker/timing/timing.py, reduced: flush (read 2 x L2),
    synchronise, spin, start event, call, end event."""

    def __init__(self, spin_us: float = 20.0) -> None:
        torch = _torch()
        self.torch = torch
        dev = torch.device("cuda", 0)
        l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
        n = max(2 * l2, 64 << 20) // 4
        self.flush_buf = torch.ones(n, dtype=torch.float32, device=dev)
        self.sink = torch.empty((), dtype=torch.float32, device=dev)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.cycles_per_us = self._calibrate()
        self.spin_us = spin_us

    def _calibrate(self) -> float:
        torch = self.torch
        rates = []
        for _ in range(5):
            torch.cuda.synchronize()
            self.start.record()
            torch.cuda._sleep(1_000_000)
            self.end.record()
            self.end.synchronize()
            rates.append(1_000_000 / (self.start.elapsed_time(self.end) * 1e3))
        return statistics.median(rates[1:])

    def flush(self) -> None:
        self.torch.sum(self.flush_buf, dim=0, out=self.sink)

    def spin(self, us: float) -> None:
        self.torch.cuda._sleep(max(1, int(us * self.cycles_per_us)))

    def trial(self, call: Any, flush: bool = True) -> float:
        torch = self.torch
        if flush:
            self.flush()
        torch.cuda.synchronize()
        self.spin(self.spin_us)
        self.start.record()
        call()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1e3  # us


def kernels() -> dict[str, Any]:
    """name -> zero-argument call, on fresh inputs of this process."""
    torch = _torch()
    out: dict[str, Any] = {"empty": lambda: None}
    for s in SIZES:
        a = torch.randn(1 << s, device="cuda")
        b = torch.randn(1 << s, device="cuda")
        c = torch.empty_like(a)
        out[f"add_2^{s}"] = lambda a=a, b=b, c=c: torch.add(a, b, out=c)
    x = torch.randn(MATMUL_N, MATMUL_N, device="cuda")
    y = torch.randn(MATMUL_N, MATMUL_N, device="cuda")
    out[f"relu_matmul_{MATMUL_N}"] = lambda: torch.relu(x @ y)
    return out


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# -- per_process ---------------------------------------------------------------------------


def _per_process_worker(lock: Any, queue: Any, trials: int, names: list[str]) -> None:
    torch = _torch()
    torch.cuda.init()
    proto = Protocol()
    ks = kernels()
    for k in names:  # warm up outside the lock (compiles, cuBLAS handles)
        for _ in range(3):
            ks[k]()
    torch.cuda.synchronize()
    with lock:
        samples: dict[str, list[float]] = {k: [] for k in names}
        for _ in range(trials):
            for k in names:  # interleaved: drift hits every kernel alike
                samples[k].append(proto.trial(ks[k]))
    queue.put({"pid": os.getpid(), "samples": samples})


def per_process(procs: int, trials: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    lock = ctx.Lock()
    queue = ctx.Queue()
    names = ["empty", "add_2^12", "add_2^16", "add_2^20"]
    ps = [
        ctx.Process(target=_per_process_worker, args=(lock, queue, trials, names))
        for _ in range(procs)
    ]
    for p in ps:
        p.start()
    results = [queue.get(timeout=240) for _ in ps]
    for p in ps:
        p.join(timeout=30)
    print("\n== per_process: median event time (us) per fresh process, flushed protocol")
    print("pid      " + " ".join(f"{n:>10}" for n in names))
    for r in results:
        print(f"{r['pid']:<8} " + " ".join(f"{_med(r['samples'][n]):10.3f}" for n in names))
    return {"names": names, "processes": results}


# -- bracket -------------------------------------------------------------------------------


def _bracket_peer(conn: Any, names: list[str]) -> None:
    """The 'candidate': waits on the judge's event, runs the call between its own events,
    records the judge's second event. Its own event time is its claim."""
    torch = _torch()
    torch.cuda.init()
    proto = Protocol()
    ks = kernels()
    for k in names:
        for _ in range(3):
            ks[k]()
    torch.cuda.synchronize()
    handles = conn.recv()
    dev = torch.device("cuda", 0)
    go = [torch.cuda.Event.from_ipc_handle(dev, h) for h in handles["go"]]
    done = [torch.cuda.Event.from_ipc_handle(dev, h) for h in handles["done"]]
    e1 = torch.cuda.Event(enable_timing=True)
    e2 = torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream()
    conn.send("ready")
    claims: dict[str, list[float]] = {k: [] for k in names}
    while True:
        msg = conn.recv()
        if msg is None:
            break
        slot, name = msg
        stream.wait_event(go[slot])
        e1.record()
        ks[name]()
        e2.record()
        done[slot].record()
        conn.send("enqueued")
        e2.synchronize()
        claims[name].append(e1.elapsed_time(e2) * 1e3)
    del proto
    conn.send(claims)


def bracket(trials: int) -> dict[str, Any]:
    torch = _torch()
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    names = ["empty", "add_2^12", "add_2^16", "add_2^20", "add_2^24", f"relu_matmul_{MATMUL_N}"]
    peer = ctx.Process(target=_bracket_peer, args=(there, names))
    peer.start()
    torch.cuda.init()
    proto = Protocol()
    ks = kernels()
    slots = 4
    go = [torch.cuda.Event(interprocess=True) for _ in range(slots)]
    done = [torch.cuda.Event(interprocess=True) for _ in range(slots)]
    for e in go + done:
        e.record()
    torch.cuda.synchronize()
    here.send({"go": [e.ipc_handle() for e in go], "done": [e.ipc_handle() for e in done]})
    assert here.recv() == "ready"
    # The host round trip the spin must cover.
    rtt = []
    for _ in range(20):
        t0 = time.perf_counter_ns()
        here.send((0, "empty"))
        here.recv()
        rtt.append((time.perf_counter_ns() - t0) / 1e3)
    torch.cuda.synchronize()
    time.sleep(0.05)
    spin_us = max(200.0, 4 * _med(rtt))
    stream = torch.cuda.current_stream()
    brackets: dict[str, list[float]] = {k: [] for k in names}
    not_hidden: dict[str, int] = {k: 0 for k in names}
    local: dict[str, list[float]] = {k: [] for k in names}
    for k in names:
        for _ in range(3):
            ks[k]()
    torch.cuda.synchronize()
    trial = 0
    for _ in range(trials):
        for k in names:
            slot = trial % slots
            trial += 1
            proto.flush()
            torch.cuda.synchronize()
            proto.spin(spin_us)
            proto.start.record()
            go[slot].record()
            here.send((slot, k))
            here.recv()
            hidden = not proto.start.query()
            stream.wait_event(done[slot])
            proto.end.record()
            proto.end.synchronize()
            brackets[k].append(proto.start.elapsed_time(proto.end) * 1e3)
            if not hidden:
                not_hidden[k] += 1
            # the same kernel in this process, same protocol
            local[k].append(proto.trial(ks[k]))
    here.send(None)
    claims = here.recv()
    peer.join(timeout=30)
    null = _med(brackets["empty"])
    print(
        f"\n== bracket: judge events around another process's call (spin {spin_us:.0f} us, "
        f"host round trip median {_med(rtt):.1f} us)"
    )
    print(
        f"{'kernel':<18}{'bracket':>10}{'-null':>10}{'p10-p90':>16}{'claim':>10}"
        f"{'judge':>10}{'unhidden':>9}"
    )
    rows = {}
    for k in names:
        b = sorted(brackets[k])
        p10 = b[len(b) // 10]
        p90 = b[(9 * len(b)) // 10]
        row = {
            "bracket_median": _med(b),
            "bracket_minus_null": _med(b) - null,
            "p10": p10,
            "p90": p90,
            "claim_median": _med(claims[k]),
            "judge_local_median": _med(local[k]),
            "not_hidden": not_hidden[k],
        }
        rows[k] = row
        print(
            f"{k:<18}{row['bracket_median']:10.3f}{row['bracket_minus_null']:10.3f}"
            f"{p10:8.2f}-{p90:<8.2f}{row['claim_median']:10.3f}"
            f"{row['judge_local_median']:10.3f}{not_hidden[k]:9d}"
        )
    return {
        "spin_us": spin_us,
        "rtt_us": rtt,
        "rows": rows,
        "brackets": brackets,
        "claims": claims,
        "local": local,
    }


# -- graph_k -------------------------------------------------------------------------------


def graph_k(trials: int, k_launches: int = 32) -> dict[str, Any]:
    torch = _torch()
    proto = Protocol()
    rows = {}
    print(f"\n== graph_k: per-launch time (us) of K={k_launches} launches in one CUDA graph")
    print(f"{'kernel':<12}{'flushed 1/window':>18}{'graph warm':>12}{'graph rotating':>16}")
    for s in [12, 14, 16, 18, 20, 22]:
        n = 1 << s
        a = torch.randn(n, device="cuda")
        b = torch.randn(n, device="cuda")
        c = torch.empty_like(a)
        single = [proto.trial(lambda a=a, b=b, c=c: torch.add(a, b, out=c)) for _ in range(trials)]
        # warm: the same buffers K times
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.add(a, b, out=c)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k_launches):
                torch.add(a, b, out=c)
        warm = [proto.trial(g.replay) / k_launches for _ in range(trials)]
        # rotating: K distinct buffer triples, > L2 in all when large enough
        copies = max(1, min(k_launches, (256 << 20) // (12 * n)))
        bufs = [
            (
                torch.randn(n, device="cuda"),
                torch.randn(n, device="cuda"),
                torch.empty(n, device="cuda"),
            )
            for _ in range(copies)
        ]
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            for i in range(k_launches):
                x, y, z = bufs[i % copies]
                torch.add(x, y, out=z)
        rot = [proto.trial(g2.replay) / k_launches for _ in range(trials)]
        rows[s] = {
            "single": _med(single),
            "graph_warm": _med(warm),
            "graph_rotating": _med(rot),
            "copies": copies,
        }
        print(f"add_2^{s:<6}{_med(single):18.3f}{_med(warm):12.3f}{_med(rot):16.3f}")
        del g, g2, bufs
    return rows


# -- driver API helpers (probe 2) -----------------------------------------------------------

PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry kf_spin(.param .u64 kf_spin_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [kf_spin_ns];
  mov.u64 %rd2, %globaltimer;
$L_spin:
  mov.u64 %rd3, %globaltimer;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra $L_spin;
  ret;
}

.visible .entry kf_stamp(.param .u64 kf_stamp_p)
{
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [kf_stamp_p];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u64 %rd2, %globaltimer;
  st.global.u64 [%rd1], %rd2;
  ret;
}
"""


class Drv:
    """The few driver calls the probe needs, on the calling thread's current context."""

    def __init__(self) -> None:
        import ctypes

        self.c = ctypes
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.mod = ctypes.c_void_p()
        self._check(self.lib.cuModuleLoadData(ctypes.byref(self.mod), PTX.encode() + b"\0"), "load")
        self.spin_f = self._func(b"kf_spin")
        self.stamp_f = self._func(b"kf_stamp")

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"driver call {what} failed: {rc}")

    def _func(self, name: bytes) -> Any:
        f = self.c.c_void_p()
        self._check(self.lib.cuModuleGetFunction(self.c.byref(f), self.mod, name), "getfunc")
        return f

    def _launch(self, f: Any, arg: int, stream: int) -> None:
        c = self.c
        v = c.c_uint64(arg)
        params = (c.c_void_p * 1)(c.cast(c.byref(v), c.c_void_p))
        self._check(
            self.lib.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, c.c_void_p(stream), params, None),
            "launch",
        )

    def spin_ns(self, ns: int, stream: int) -> None:
        self._launch(self.spin_f, ns, stream)

    def stamp(self, ptr: int, stream: int) -> None:
        self._launch(self.stamp_f, ptr, stream)

    def wait_event(self, stream: int, event: int) -> None:
        self._check(
            self.lib.cuStreamWaitEvent(self.c.c_void_p(stream), self.c.c_void_p(event), 0), "wait"
        )


def _init_cuda() -> None:
    torch = _torch()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()


def _stream() -> int:
    return int(_torch().cuda.current_stream().cuda_stream)


def _warm_clocks(drv: Drv, ms: float = 150.0) -> None:
    torch = _torch()
    drv.spin_ns(int(ms * 1e6), _stream())
    torch.cuda.synchronize()


# -- clocks --------------------------------------------------------------------------------


def clocks() -> dict[str, Any]:
    """How fast the SM clock comes up from idle: torch.cuda._sleep's cycles per us, measured
    back to back, after 1.5 s of idle."""
    torch = _torch()
    _init_cuda()
    drv = Drv()
    proto = Protocol()
    time.sleep(1.5)
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    rows = []
    for _ in range(80):
        s.record()
        torch.cuda._sleep(100_000)
        e.record()
        e.synchronize()
        rows.append(((time.perf_counter() - t0) * 1e3, 100_000 / (s.elapsed_time(e) * 1e3)))
    cold_empty = []
    time.sleep(1.5)
    for _ in range(11):
        cold_empty.append(proto.trial(lambda: None))
    _warm_clocks(drv)
    warm_empty = [proto.trial(lambda: None) for _ in range(11)]
    print("\n== clocks: cycles/us of a device spin, back to back from 1.5 s idle")
    print("  " + "  ".join(f"{t:.0f}ms:{r:.0f}" for t, r in rows[::8]))
    print(
        f"  empty window after 1.5 s idle: {_med(cold_empty):.3f} us "
        f"(first {cold_empty[0]:.3f}); after 150 ms busy: {_med(warm_empty):.3f} us"
    )
    return {"rate": rows, "cold_empty": cold_empty, "warm_empty": warm_empty}


# -- per_process2 --------------------------------------------------------------------------


def _per_process2_worker(lock: Any, queue: Any, trials: int, names: list[str]) -> None:
    torch = _torch()
    _init_cuda()
    drv = Drv()
    proto = Protocol()
    ks = kernels()
    for k in names:
        for _ in range(3):
            ks[k]()
    torch.cuda.synchronize()
    with lock:
        _warm_clocks(drv)
        proto.cycles_per_us = proto._calibrate()
        samples: dict[str, list[float]] = {k: [] for k in names}
        for _ in range(trials):
            for k in names:
                samples[k].append(proto.trial(ks[k]))
    queue.put({"pid": os.getpid(), "samples": samples})


def per_process2(procs: int, trials: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    lock = ctx.Lock()
    queue = ctx.Queue()
    names = ["empty", "add_2^12", "add_2^16", "add_2^20"]
    ps = [
        ctx.Process(target=_per_process2_worker, args=(lock, queue, trials, names))
        for _ in range(procs)
    ]
    for p in ps:
        p.start()
    results = [queue.get(timeout=240) for _ in ps]
    for p in ps:
        p.join(timeout=30)
    print("\n== per_process2: as per_process, each after 150 ms of device spin (clocks up)")
    print("pid      " + " ".join(f"{n:>10}" for n in names))
    for r in results:
        print(f"{r['pid']:<8} " + " ".join(f"{_med(r['samples'][n]):10.3f}" for n in names))
    return {"names": names, "processes": results}


# -- ctx2: the judge's own second context as the other side of a bracket ---------------------


def ctx2(trials: int) -> dict[str, Any]:
    """A bracket whose other side is a second context of this process (driver API): its
    null, and a kernel of this process's context inside the same bracket shape."""
    torch = _torch()
    c = __import__("ctypes")
    _init_cuda()
    drv = Drv()
    proto = Protocol()
    ks = kernels()
    lib = drv.lib
    dev = c.c_int()
    drv._check(lib.cuDeviceGet(c.byref(dev), 0), "dev")
    primary = c.c_void_p()
    drv._check(lib.cuCtxGetCurrent(c.byref(primary)), "getcur")
    t0 = time.perf_counter()
    helper = c.c_void_p()
    drv._check(lib.cuCtxCreate_v2(c.byref(helper), 0, dev), "ctxcreate")
    created_ms = (time.perf_counter() - t0) * 1e3
    s2 = c.c_void_p()
    drv._check(lib.cuStreamCreate(c.byref(s2), 1), "stream")
    done2 = c.c_void_p()
    drv._check(lib.cuEventCreate(c.byref(done2), 2), "event")
    ev2a = c.c_void_p()
    ev2b = c.c_void_p()
    drv._check(lib.cuEventCreate(c.byref(ev2a), 0), "event")
    drv._check(lib.cuEventCreate(c.byref(ev2b), 0), "event")
    out = c.c_void_p()
    drv._check(lib.cuCtxPopCurrent_v2(c.byref(out)), "pop")
    go = torch.cuda.Event()
    stream = _stream()
    names = ["null", "add_2^12", "add_2^20", f"relu_matmul_{MATMUL_N}"]
    br: dict[str, list[float]] = {k: [] for k in names}
    local: dict[str, list[float]] = {k: [] for k in names}
    ev2_ms: list[float] = []
    for k in names[1:]:
        ks[k]()
    _warm_clocks(drv)
    proto.cycles_per_us = proto._calibrate()
    for _ in range(trials):
        for k in names:
            proto.flush()
            torch.cuda.synchronize()
            drv.spin_ns(100_000, stream)
            proto.start.record()
            go.record()
            drv._check(lib.cuCtxPushCurrent_v2(helper), "push")
            drv.wait_event(s2.value, go.cuda_event)
            lib.cuEventRecord(ev2a, s2)
            lib.cuEventRecord(ev2b, s2)
            lib.cuEventRecord(done2, s2)
            drv._check(lib.cuCtxPopCurrent_v2(c.byref(out)), "pop")
            drv.wait_event(stream, done2.value)
            if k != "null":
                ks[k]()
            proto.end.record()
            proto.end.synchronize()
            br[k].append(proto.start.elapsed_time(proto.end) * 1e3)
            ms = c.c_float()
            lib.cuEventElapsedTime(c.byref(ms), ev2a, ev2b)
            ev2_ms.append(ms.value * 1e3)
            local[k].append(proto.trial(ks[k] if k != "null" else (lambda: None)))
    null = _med(br["null"])
    print(
        f"\n== ctx2: bracket through a second context of the judge (created in {created_ms:.0f} ms;"
        f" empty window there {_med(ev2_ms):.3f} us)"
    )
    print(f"{'kernel':<18}{'bracket':>10}{'-null':>10}{'p10-p90':>18}{'local':>10}")
    rows = {}
    for k in names:
        b = sorted(br[k])
        rows[k] = {
            "bracket": _med(b),
            "minus_null": _med(b) - null,
            "local": _med(local[k]),
            "p10": b[len(b) // 10],
            "p90": b[(9 * len(b)) // 10],
        }
        print(
            f"{k:<18}{_med(b):10.3f}{_med(b) - null:10.3f}{rows[k]['p10']:9.2f}-"
            f"{rows[k]['p90']:<8.2f}{_med(local[k]):10.3f}"
        )
    return {"created_ms": created_ms, "rows": rows, "brackets": br, "ev2_us": ev2_ms}


# -- bracket2 ------------------------------------------------------------------------------


def _bracket2_peer(conn: Any, names: list[str]) -> None:
    torch = _torch()
    _init_cuda()
    drv = Drv()
    ks = kernels()
    for k in names:
        for _ in range(3):
            ks[k]()
    stamp = torch.zeros(1, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    handles = conn.recv()
    dev = torch.device("cuda", 0)
    go = [torch.cuda.Event.from_ipc_handle(dev, h) for h in handles["go"]]
    done = [torch.cuda.Event.from_ipc_handle(dev, h) for h in handles["done"]]
    e1 = torch.cuda.Event(enable_timing=True)
    e2 = torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream()
    conn.send("ready")
    claims: dict[str, list[float]] = {k: [] for k in names}
    while True:
        msg = conn.recv()
        if msg is None:
            break
        if msg == "stamp":
            drv.stamp(stamp.data_ptr(), _stream())
            torch.cuda.synchronize()
            conn.send(int(stamp.item()))
            continue
        slot, name = msg
        stream.wait_event(go[slot])
        e1.record()
        ks[name]()
        e2.record()
        done[slot].record()
        conn.send("enqueued")
        e2.synchronize()
        claims[name].append(e1.elapsed_time(e2) * 1e3)
    conn.send(claims)


def bracket2(trials: int) -> dict[str, Any]:
    torch = _torch()
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    names = ["empty", "add_2^12", "add_2^16", "add_2^20", "add_2^24", f"relu_matmul_{MATMUL_N}"]
    peer = ctx.Process(target=_bracket2_peer, args=(there, names))
    peer.start()
    _init_cuda()
    drv = Drv()
    proto = Protocol()
    ks = kernels()
    slots = 4
    go = [torch.cuda.Event(interprocess=True) for _ in range(slots)]
    done = [torch.cuda.Event(interprocess=True) for _ in range(slots)]
    for e in go + done:
        e.record()
    torch.cuda.synchronize()
    here.send({"go": [e.ipc_handle() for e in go], "done": [e.ipc_handle() for e in done]})
    assert here.recv() == "ready"
    stream_obj = torch.cuda.current_stream()
    stream = _stream()
    # Does the other process's work run while this one spins (time slicing)?
    stamps = torch.zeros(2, dtype=torch.int64, device="cuda")
    preempt = []
    for _ in range(5):
        _warm_clocks(drv, 20)
        drv.stamp(stamps.data_ptr(), stream)
        drv.spin_ns(3_000_000, stream)
        drv.stamp(stamps.data_ptr() + 8, stream)
        time.sleep(0.0005)
        here.send("stamp")
        p = here.recv()
        torch.cuda.synchronize()
        j0, j1 = (int(v) for v in stamps.tolist())
        preempt.append({"peer_after_spin_start_us": (p - j0) / 1e3, "spin_us": (j1 - j0) / 1e3})
    for k in names:
        for _ in range(3):
            ks[k]()
    _warm_clocks(drv)
    proto.cycles_per_us = proto._calibrate()
    spin_ns = 600_000
    brackets: dict[str, list[float]] = {k: [] for k in names}
    not_hidden: dict[str, int] = {k: 0 for k in names}
    local: dict[str, list[float]] = {k: [] for k in names}
    trial = 0
    for _ in range(trials):
        for k in names:
            slot = trial % slots
            trial += 1
            proto.flush()
            torch.cuda.synchronize()
            drv.spin_ns(spin_ns, stream)
            proto.start.record()
            go[slot].record()
            here.send((slot, k))
            here.recv()
            stream_obj.wait_event(done[slot])
            proto.end.record()
            hidden = not proto.start.query()
            proto.end.synchronize()
            brackets[k].append(proto.start.elapsed_time(proto.end) * 1e3)
            if not hidden:
                not_hidden[k] += 1
            local[k].append(proto.trial(ks[k]))
    here.send(None)
    claims = here.recv()
    peer.join(timeout=30)
    null = _med(brackets["empty"])
    print("\n== preempt: the other process's unsynchronised stamp vs this one's 3 ms spin")
    for p in preempt:
        print(
            f"  peer ran {p['peer_after_spin_start_us']:.1f} us after the spin started "
            f"(spin {p['spin_us']:.1f} us)"
        )
    print(
        f"\n== bracket2: judge events around another process's call (globaltimer spin "
        f"{spin_ns / 1e3:.0f} us, clocks warmed)"
    )
    print(
        f"{'kernel':<18}{'bracket':>10}{'-null':>10}{'p10-p90':>18}{'claim':>10}"
        f"{'judge':>10}{'unhidden':>9}"
    )
    rows = {}
    for k in names:
        b = sorted(brackets[k])
        row = {
            "bracket_median": _med(b),
            "bracket_minus_null": _med(b) - null,
            "p10": b[len(b) // 10],
            "p90": b[(9 * len(b)) // 10],
            "claim_median": _med(claims[k]),
            "judge_local_median": _med(local[k]),
            "not_hidden": not_hidden[k],
        }
        rows[k] = row
        print(
            f"{k:<18}{row['bracket_median']:10.3f}{row['bracket_minus_null']:10.3f}"
            f"{row['p10']:9.2f}-{row['p90']:<8.2f}{row['claim_median']:10.3f}"
            f"{row['judge_local_median']:10.3f}{not_hidden[k]:9d}"
        )
    return {
        "preempt": preempt,
        "rows": rows,
        "brackets": brackets,
        "claims": claims,
        "local": local,
    }


# -- startup -------------------------------------------------------------------------------

STARTUP = r"""
import time, json
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.cuda.init(); x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
y = x.new_ones(64, 64) @ x.new_ones(64, 64); torch.cuda.synchronize()
t3 = time.perf_counter()
import triton
t4 = time.perf_counter()
print(json.dumps({"import_torch_s": t1 - t0, "cuda_context_s": t2 - t1, "cublas_s": t3 - t2,
                  "import_triton_s": t4 - t3}))
"""


def startup(reps: int) -> list[dict[str, float]]:
    out = []
    for _ in range(reps):
        r = subprocess.run(
            [sys.executable, "-c", STARTUP],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode == 0:
            out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    print("\n== startup of a fresh process (s)")
    for r in out:
        print("  " + "  ".join(f"{k} {v:.3f}" for k, v in r.items()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--trials", type=int, default=41)
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--parts", default="per_process,bracket,graph_k,startup")
    args = ap.parse_args()
    parts = args.parts.split(",")
    report: dict[str, Any] = {}
    started = time.time()
    for name in parts:
        t0 = time.time()
        try:
            if name == "per_process":
                report[name] = per_process(args.procs, args.trials)
            elif name == "bracket":
                report[name] = bracket(args.trials)
            elif name == "graph_k":
                report[name] = graph_k(args.trials)
            elif name == "clocks":
                report[name] = clocks()
            elif name == "per_process2":
                report[name] = per_process2(args.procs, args.trials)
            elif name == "ctx2":
                report[name] = ctx2(args.trials)
            elif name == "bracket2":
                report[name] = bracket2(args.trials)
            elif name == "startup":
                report[name] = startup(2)
        except Exception as e:  # one part failing still leaves the others' numbers
            import traceback

            traceback.print_exc()
            report[name] = {"error": repr(e)}
        print(f"[{name}: {time.time() - t0:.1f} s]", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "judge_clock_probe.json"), "w") as f:
        json.dump(report, f)
    print(f"total {time.time() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
