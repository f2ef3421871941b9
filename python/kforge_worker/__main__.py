"""Command line: `zygote` (the supervisor's worker) and `run-job` (one job, for debugging).

    python -m kforge_worker zygote --device cpu|cuda:N [--arch 90] The control socket is fd 3
    (AF_UNIX SOCK_SEQPACKET); see docs/worker-protocol.md. python -m kforge_worker candidate
    --device cpu|cuda:N --fd N A candidate process serving a judge on socket N (started by the
    judge itself where a fork is impossible; see process/jailer.py). python -m kforge_worker
    run-job SPEC.json [--device cpu|cuda:N] Runs one job in this process and prints the result
    JSON on stdout (the kernel's own output goes to stderr). SPEC.json is a job spec or a whole
    `job` message. python -m kforge_worker measure-peaks --device cuda:N [--out FILE] The
    device's peak bandwidth and GEMM FLOP/s (timing/peaks.py), run by the server once per GPU;
    imports no user code. python -m kforge_worker replay BUNDLE.pt [--repeat N] [--device
    cuda|cpu] One call (or N) of one kernel on saved inputs (a device_metrics.ReplayBundle),
    inside the NVTX range that Nsight Compute is told to profile (candidate/replay.py;
    timing/device_metrics.py starts it under `ncu`, as a child of the process that ran the
    kernel).

The environment is prepared before torch or triton are imported: on the cpu device Triton
runs through its interpreter (TRITON_INTERPRET=1); on a GPU the interpreter is off.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()

import argparse  # noqa: E402 - the start time above includes every import
import os  # noqa: E402
import sys  # noqa: E402


def prepare_environment(device: str) -> None:
    """Must run before torch/triton are imported."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    # torch.cuda.is_available() must not initialise CUDA in the zygote.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def _run_job(spec_path: str, device_text: str | None) -> int:
    import json
    import tempfile

    with open(spec_path) as f:
        spec = json.load(f)
    if isinstance(spec, dict) and spec.get("type") == "job":
        spec = spec.get("job")
    if not isinstance(spec, dict):
        print("run-job: the spec must be a JSON object", file=sys.stderr)
        return 2
    device_text = device_text or str(spec.get("device") or "cpu")
    spec["device"] = device_text
    spec.setdefault("scratch_dir", tempfile.mkdtemp(prefix="kforge-job-"))
    prepare_environment("cpu" if device_text == "cpu" else "cuda")

    from kforge_worker.core.devinfo import parse_device
    from kforge_worker.core.protocol import encode_json
    from kforge_worker.core.spec import SpecError, parse_job
    from kforge_worker.judge.evaluate import run_job

    try:
        job = parse_job(spec)
    except SpecError as e:
        print(f"run-job: bad job spec: {e}", file=sys.stderr)
        return 2
    result_fd = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)  # the kernel's prints must not corrupt the result on stdout
    result = run_job(job, parse_device(device_text))
    sys.stdout.flush()
    with os.fdopen(result_fd, "wb") as out:
        out.write(encode_json(result.to_dict()) + b"\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kforge_worker")
    sub = parser.add_subparsers(dest="command", required=True)
    zyg = sub.add_parser("zygote", help="serve the supervisor on fd 3")
    zyg.add_argument("--device", required=True, help="cpu or cuda:N")
    zyg.add_argument("--arch", type=int, default=None, help="GPU arch to warm (e.g. 90)")
    cand = sub.add_parser("candidate", help="serve a judge on an inherited socket (internal)")
    cand.add_argument("--device", required=True)
    cand.add_argument("--fd", type=int, required=True)
    run = sub.add_parser("run-job", help="run one job spec in this process")
    run.add_argument("spec")
    run.add_argument("--device", default=None, help="cpu or cuda:N (default: the spec's)")
    peaks = sub.add_parser("measure-peaks", help="measure the GPU's bandwidth and FLOP/s")
    peaks.add_argument("--device", required=True, help="cuda:N")
    peaks.add_argument("--out", default=None, help="write the JSON here (default: stdout)")
    replay = sub.add_parser("replay", help="one call of one kernel on saved inputs (for ncu)")
    replay.add_argument("bundle")
    replay.add_argument("--repeat", type=int, default=1)
    replay.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    if args.command == "measure-peaks":
        prepare_environment("cuda")
        from kforge_worker.timing import peaks as peaks_module

        return peaks_module.main(args.device, args.out)
    if args.command == "replay":
        prepare_environment(args.device)
        from kforge_worker.candidate import replay as replay_module

        return replay_module.replay_main(args.bundle, max(1, args.repeat))
    if args.command == "zygote":
        prepare_environment("cpu" if args.device == "cpu" else "cuda")
        from kforge_worker import zygote

        code = zygote.main(args.device, args.arch, _STARTED)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # skip interpreter teardown (about a second with torch loaded)
    if args.command == "candidate":
        prepare_environment("cpu" if args.device == "cpu" else "cuda")
        import socket

        from kforge_worker.core.devinfo import parse_device
        from kforge_worker.process.jailer import candidate_main

        code = candidate_main(socket.socket(fileno=args.fd), parse_device(args.device), None)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return _run_job(args.spec, args.device)


if __name__ == "__main__":
    sys.exit(main())
