"""Where the judged path's extra time comes from (issue 31): a float32 add timed the way a
candidate is (judge/judged.py: the judge flushes L2 and spins, writes `go`, waits for `done`; a
second process waits for `go`, records its events around the add, writes `done`) against
the same add timed in the judge's own process (timing.GpuTrialRunner), per size, with the
second process's inputs

    regions  views of the judge's exportable allocation (how a candidate gets its inputs)
    own      its own torch allocations

and the judge writing fresh values into the regions before each trial or not. Prints the
medians (us) of the second process's event windows (its claims) and the judge's local
timing; an empty call in both too.

    python bench/judged_path_probe.py [--sizes 12,16,20] [--trials 200] [--device cuda:0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))


def child(device_name: str, fds: list[int], sizes: list[int]) -> int:
    """The second process: commands on stdin, answers on stdout, one JSON line each."""
    import torch

    from kforge_worker.core import devmem

    device = torch.device(device_name)
    torch.cuda.set_device(device)
    torch.empty(0, device=device)
    go = devmem.import_fd(device, fds[0], sizes[0], writable=False)
    done = devmem.import_fd(device, fds[1], sizes[1], writable=True)
    region = devmem.import_fd(device, fds[2], sizes[2], writable=False)
    words = region.view.view(torch.float32)
    a = b = torch.empty(0, device=device)
    pending: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    empty = False
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "setup":
            n = 1 << cmd["log2"]
            empty = cmd["placement"] == "empty"
            if cmd["placement"] == "own":
                a, b = torch.randn(n, device=device), torch.randn(n, device=device)
            else:
                a, b = words[:n], words[n : 2 * n]
            for _ in range(10):
                torch.add(a, b)
            torch.cuda.synchronize()
            pending = []
            reply: object = "ok"
        elif cmd["op"] == "trial":
            stream = torch.cuda.current_stream(device)
            devmem.stream_wait_u32(stream.cuda_stream, go.ptr, cmd["n"])
            e1, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e1.record()
            if not empty:
                torch.add(a, b)
            e2.record()
            devmem.stream_write_u32(stream.cuda_stream, done.ptr, cmd["n"])
            pending.append((e1, e2))
            reply = "q"
        else:
            torch.cuda.synchronize()
            reply = [e1.elapsed_time(e2) * 1e3 for e1, e2 in pending]
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="12,16,20")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        spec = json.loads(args.child)
        return child(args.device, spec["fds"], spec["sizes"])

    import torch

    from kforge_worker.core import devmem
    from kforge_worker.timing.timing import GlobalTimerSpin, GpuTrialRunner, flusher_for

    device = torch.device(args.device)
    torch.cuda.set_device(device)
    sizes = [int(s) for s in args.sizes.split(",")]
    go, done = devmem.allocate(device, 4), devmem.allocate(device, 4)
    go.view[:4].zero_()
    done.view[:4].zero_()
    region = devmem.allocate(device, 2 * 4 * (1 << max(sizes)))
    words = region.view.view(torch.float32)
    words.normal_()
    torch.cuda.synchronize()
    fds = [go.export(), done.export(), region.export()]
    spec = {"fds": fds, "sizes": [go.size, done.size, region.size]}
    proc = subprocess.Popen(
        [sys.executable, __file__, "--device", args.device, "--child", json.dumps(spec)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=fds,
    )  # fmt: skip
    for fd in fds:
        os.close(fd)

    def ask(**cmd: object) -> object:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(cmd) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    flusher = flusher_for(device)
    spinner = GlobalTimerSpin(device)
    stream = torch.cuda.current_stream(device)
    counter = [0]

    def judged(log2: int, placement: str, fresh: bool) -> float:
        n = 1 << log2
        ask(op="setup", log2=log2, placement=placement)
        for _ in range(args.trials):
            counter[0] += 1
            k = counter[0]
            if fresh:
                words[: 2 * n].normal_()
            flusher.flush()
            spinner.spin(2000.0, stream)  # hides the round trip to the other process
            devmem.stream_write_u32(stream.cuda_stream, go.ptr, k)
            devmem.stream_wait_u32(stream.cuda_stream, done.ptr, k)
            ask(op="trial", n=k)
            torch.cuda.synchronize()
        claims = ask(op="claims")
        assert isinstance(claims, list)
        return statistics.median(claims[10:])

    runner = GpuTrialRunner(device, l2_flush=True, spin_us=100.0)

    def local(log2: int, placement: str) -> float:
        n = 1 << log2
        if placement == "empty":
            a = b = None
        elif placement == "own":
            a, b = torch.randn(n, device=device), torch.randn(n, device=device)
        else:
            a, b = words[:n], words[n : 2 * n]

        def call() -> object:
            return None if a is None else torch.add(a, b)

        samples = [runner.run(call).event_ms * 1e3 for _ in range(args.trials)]
        return statistics.median(samples[10:])

    rows = {
        "judged regions fresh": lambda s: judged(s, "regions", True),
        "judged regions same": lambda s: judged(s, "regions", False),
        "judged own": lambda s: judged(s, "own", False),
        "judged empty": lambda s: judged(s, "empty", False),
        "local regions": lambda s: local(s, "regions"),
        "local own": lambda s: local(s, "own"),
        "local empty": lambda s: local(s, "empty"),
    }
    print(f"{'path':<22}" + "".join(f"{'2^' + str(s):>10}" for s in sizes))
    for name, measure in rows.items():
        print(f"{name:<22}" + "".join(f"{measure(s):10.2f}" for s in sizes), flush=True)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
