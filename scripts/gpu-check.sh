#!/usr/bin/env bash
# Every GPU test and GPU benchmark in one command, for the GPU host (H100). Prints a short
# table last. Uses the host's python3 (torch, triton) and a kforge binary built elsewhere:
#   KFORGE_BIN   the binary (default: build/gpu/kforge, made by `scripts/package-gpu.sh`)
#   OUT          where logs and raw numbers go (default: ./gpu-check-out)
#   SKIP_WORKER_TESTS=1  skip tests/python (the worker package's own suite, ~2 min)
#   ONLY_CUDA=1          run only the `cuda` kernel parts (tests, latency bench, ncu check)
#   SKIP_CUDA=1          skip them (with ONLY_CUDA, the two halves fit the 10-minute call limit)
#   ONLY_KERNELS=1       run only the kernel library part (tests/kernels on the GPU, then
#                        `kforge bench` of all five ops, all versions, all sizes, and the targets)
#   SKIP_KERNELS=1       skip it
#   KERNEL_OPS=a,b       the ops `kforge bench` runs (default all five; split them across calls
#                        if one call would pass the 10-minute limit, e.g. add,softmax,gelu and
#                        layer_norm,mha: each call writes its own $OUT/bench-<ops>/)
#   ONLY_TRUST=1         run only the sandbox and trust parts (hostile jobs, adversarial corpus)
#   ONLY_FIDELITY=1      run only bench/timing_fidelity.py (kforge vs ncu vs do_bench); with
#   FIDELITY_KINDS       its kernel kinds (default triton,cuda,torch,torch_cuda; on an H200 with
#                        4 evaluations: cuda 2 min, triton and torch 4 min each, torch_cuda
#                        2-3 min per case (an extension build per evaluation), so one or two
#                        kinds per call), FIDELITY_EVALS (default 10), FIDELITY_ARGS
#                        (more options, e.g. "--sizes 16,20,24 --extra gemm --graph-evals 0")
#   SKIP_FIDELITY=1      skip the fidelity bench in a full run
#   ONLY_TIMING=1        run only the timing / kernel activity / device metrics checks under the
#                        sandbox: tests/python/test_gpu.py + test_device_metrics.py,
#                        tests/integration/test_timing_fields.py and the adversarial corpus
#   ONLY_KERNELBENCH_RUN=1  run only bench/kernelbench_runner.py: `kforge kernelbench` on levels
#                        1+2 torch vs torch (all correct, fast_1, wall time) and on 12 level-2
#                        problems against a process per sample (KernelBench's eval with a
#                        checkout at KERNELBENCH_DIR, default kernelbench/); KB_RUN_PARTS
#                        (all,l2: one part per call if both pass the 10-minute limit),
#                        KB_RUN_ARGS (more options, e.g. "--in-flight 8 --pipeline-depth 2")
#   ONLY_IDENTITY=1      run only bench/identity.py: identical sources as reference and
#                        candidate through POST /compare (issue 31's targets: speedups within
#                        1.00 +- 0.03, `indistinguishable`, intervals covering 1); IDENTITY_ARGS
#                        (default "--sizes 12,16,20,24 --evals 5"); then bench/identity_local.py
#                        (the same adds through `kforge_worker run-job`: an unjailed candidate,
#                        no zygote; IDENTITY_LOCAL_ARGS)
#   ONLY_WORKBENCH=1     run only the Triton workbench's tests (tests/integration/test_workbench.py:
#                        the whole agent session, ~2 min): it prints a line "workbench session
#                        wb_... on cuda:0: best vN; v2 [size: median ms speedup %BW ...]; v3 [...]"
#                        that the table repeats
#   MULTI_GPU=1          run only the two-GPU parts (a two-GPU kind): tests/integration/
#                        test_multi_gpu.py and bench/multi_gpu_throughput.py (MULTI_GPU_JOBS jobs,
#                        default 24, on one GPU then on every GPU)
#   ONLY_BATCH=1         run only the batch parts: tests/integration/test_batch.py on the GPU,
#                        bench/wire_throughput.py (64 MiB through the judge <-> candidate wire),
#                        bench/batch_throughput.py (16 candidates as one batch vs 16 compares
#                        at once and one after another,
#                        on a server with --pipeline-depth BATCH_PIPELINE_DEPTH, default 3)
#                        and bench/interference.py (timing alone vs under compile load, then
#                        with --pipeline-depth 3: a cuda kernel's and a Triton compare's timing
#                        alone vs with 6 other jobs in flight, half native cuda, half Python
#                        Triton; no exclusive grants may overlap) and
#                        tests/integration/test_pipeline.py; INTERFERENCE_JOBS (default 6: each
#                        mode's jobs; on an H200 the pipelined half alone took 5.5 min at 6)
#                        and ONLY_BATCH_PART=wire|batch|problem|interference to run one part per
#                        call (the whole part passes the 10-minute limit); `problem` is the same
#                        batch bench on a KernelBench problem judged against itself
#                        (BATCH_PROBLEM, default kernelbench/KernelBench/level2/18_Matmul_...)
#   ONLY_COMPARE=1       run only the judge's fused comparison: its GPU tests (compiled kernel
#                        vs the torch path on every verification case; the zygote precompiles
#                        it and a child verifies it) and bench/compare_kernel.py (torch path vs
#                        fused kernel on outputs up to 6.4 GB, ratio in the same run)
#   ONLY_LATENCY=1       run only the back-to-back latency benches (issue 13's p50/p95
#                        targets), one call: bench/cuda_latency.py (--skip-load-inline, 30
#                        jobs), bench/eval_latency.py (3 warm children, no baseline),
#                        bench/process_teardown.py (what a CUDA process's end costs) and
#                        bench/timing_interference.py (candidate and reference, busy / quiet)
#   ONLY_KERNELBENCH=1   run only bench/kernelbench_throughput.py: KernelBench problems (torch vs
#                        torch) through kforge and one process per problem; SKIP_KERNELBENCH=1
#                        skips it in a full run. KERNELBENCH_PROBLEMS (default
#                        kernelbench/KernelBench: DIR/level1, DIR/level2; carried here, never
#                        committed), KERNELBENCH_DIR (a KernelBench checkout whose own
#                        eval_kernel_against_ref is the baseline; default kernelbench if it has
#                        src/, else the bench's builtin per-process harness), KERNELBENCH_LEVELS
#                        (default 1,2; one level per call keeps a call under 10 minutes),
#                        KERNELBENCH_LIMIT (problems per level, default all),
#                        KERNELBENCH_BASELINE_LIMIT (baseline problems per level, evenly
#                        spaced, default 5, the rest extrapolated), KERNELBENCH_ARGS (more
#                        flags: "--baseline none" or "--kforge none" to split a long run; the
#                        --out files then go to `bench/kernelbench_throughput.py --merge`)
set -uo pipefail
cd "$(dirname "$0")/.."
export KFORGE_BIN="${KFORGE_BIN:-$PWD/build/gpu/kforge}"
export KFORGE_PYTHON="${KFORGE_PYTHON:-python3}"
export KFORGE_TEST_DEVICE="${KFORGE_TEST_DEVICE:-cuda:0}"
export PYTHONUNBUFFERED=1
out="${OUT:-$PWD/gpu-check-out}"
mkdir -p "$out"
py="$KFORGE_PYTHON"

declare -a names results
# promtool checks GET /metrics (tests/integration/test_metrics.py); the host cannot install it.
command -v promtool >/dev/null || export KFORGE_NO_PROMTOOL=1
record() { names+=("$1"); results+=("$2"); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
"$KFORGE_BIN" --version

fidelity() {
  echo "== timing fidelity: kforge median vs ncu gpu__time_duration vs do_bench (${FIDELITY_KINDS:-all kinds})"
  "$py" bench/timing_fidelity.py --kinds "${FIDELITY_KINDS:-triton,cuda,torch,torch_cuda}" \
    --evals "${FIDELITY_EVALS:-10}" --out "$out" ${FIDELITY_ARGS:-} 2>&1 | tee "$out/fidelity.log" | tail -60
  record "fidelity (${FIDELITY_KINDS:-all kinds})" "$(grep '^fidelity:' "$out/fidelity.log" | cut -d: -f2-)"
}

summary() {
  echo
  echo "== gpu-check summary ($(head -1 "$out/gpu.txt"))"
  for i in "${!names[@]}"; do printf '%-44s %s\n' "${names[$i]}" "${results[$i]}"; done
}

timing_fields() {
  echo "== kernel activity, roofline and device metrics (jobs jailed as the server runs them; then --sandbox off)"
  grep -h RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null | tee "$out/profiling-params.txt"
  "$1" -m pytest -q -rs -p no:cacheprovider tests/integration/test_timing_fields.py 2>&1 |
    tee "$out/pytest-timing-fields.log" | tail -15
  record "timing fields + device metrics pytest" "$(grep -E 'passed|failed' "$out/pytest-timing-fields.log" | tail -1)"
  record "  driver counters" "$(cat "$out/profiling-params.txt" 2>/dev/null || echo 'no /proc/driver/nvidia/params')"
  record "  device metrics skipped because" "$(grep -o 'device metrics unavailable here: .\{0,60\}' "$out/pytest-timing-fields.log" | head -1)"
}

if [[ -n "${ONLY_KERNELBENCH_RUN:-}" ]]; then
  echo "== kforge kernelbench on $KFORGE_TEST_DEVICE (bench/kernelbench_runner.py)"
  kb_parts="${KB_RUN_PARTS:-all,l2}"  # each part's files named by it: one call per part
  # shellcheck disable=SC2086  # KB_RUN_ARGS is a list of options
  "$py" bench/kernelbench_runner.py --kb "${KERNELBENCH_DIR:-$PWD/kernelbench}" \
    --device "$KFORGE_TEST_DEVICE" --parts "$kb_parts" ${KB_RUN_ARGS:-} \
    --out "$out/kernelbench-run-$kb_parts.json" 2>"$out/kernelbench-run-$kb_parts.log" |
    tee "$out/kernelbench-run-$kb_parts.txt"
  while IFS= read -r line; do record "kernelbench run" "$line"; done < <(grep '^| [l]' "$out/kernelbench-run-$kb_parts.txt")
  summary
  exit 0
fi

if [[ -n "${ONLY_IDENTITY:-}" ]]; then
  echo "== identical kernels through /compare on $KFORGE_TEST_DEVICE"
  # shellcheck disable=SC2086  # IDENTITY_ARGS is a list of options
  "$py" bench/identity.py --device "$KFORGE_TEST_DEVICE" \
    ${IDENTITY_ARGS:---sizes 12,16,20,24 --evals 5} --out "$out" 2>&1 |
    tee "$out/identity.log" | tail -16
  record "identity (bench/identity.py)" "$(tail -1 "$out/identity.log")"
  echo "== the same without the server: an unjailed candidate, no zygote (bench/identity_local.py)"
  "$py" bench/identity_local.py --device "$KFORGE_TEST_DEVICE" ${IDENTITY_LOCAL_ARGS:-} 2>&1 |
    tee "$out/identity-local.log" | tail -10
  record "identity without the jail" "$(tail -1 "$out/identity-local.log")"
  summary
  exit 0
fi

if [[ -n "${ONLY_TIMING:-}" ]]; then
  echo "== worker GPU tests: timing loop, candidate activity and its cross-checks, ncu runs"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu.py tests/python/test_device_metrics.py \
    tests/python/test_candidate_activity.py 2>&1 | tee "$out/pytest-timing-worker.log" | tail -8
  record "worker timing pytest (GPU)" "$(grep -E 'passed|failed' "$out/pytest-timing-worker.log" | tail -1)"
  timing_fields "$py"
  echo "== adversarial corpus on $KFORGE_TEST_DEVICE (controls must pass clean)"
  "$py" tests/adversarial/run.py --device "$KFORGE_TEST_DEVICE" --json "$out/adversarial.json" 2>&1 |
    tee "$out/adversarial.log" | tail -32
  record "adversarial corpus" "$(tail -1 "$out/adversarial.log")"
  summary
  exit 0
fi

kernelbench() {
  local kb_problems="${KERNELBENCH_PROBLEMS:-$PWD/kernelbench/KernelBench}"
  local kb_dir="${KERNELBENCH_DIR:-}"
  [[ -z "$kb_dir" && -d "$PWD/kernelbench/src" ]] && kb_dir="$PWD/kernelbench"
  local kb_levels="${KERNELBENCH_LEVELS:-1,2}"
  if [[ ! -d "$kb_problems" ]]; then
    record "kernelbench throughput" "not run: no problems at $kb_problems (set KERNELBENCH_PROBLEMS)"
    return
  fi
  echo "== benchmark: KernelBench levels $kb_levels, torch vs torch, kforge vs one process per problem"
  "$py" bench/kernelbench_throughput.py --problems "$kb_problems" --levels "$kb_levels" \
    --device "$KFORGE_TEST_DEVICE" --baseline-limit "${KERNELBENCH_BASELINE_LIMIT:-5}" \
    ${KERNELBENCH_LIMIT:+--limit "$KERNELBENCH_LIMIT"} ${kb_dir:+--kernelbench-dir "$kb_dir"} \
    ${KERNELBENCH_ARGS:-} \
    --out "$out/kernelbench-${kb_levels//,/-}.json" 2>"$out/kernelbench.log" |
    tee "$out/kernelbench.txt"
  local row line
  for row in "kforge all" "process/problem all"; do  # a split run (--kforge/--baseline none) has one
    line="$(grep "^$row" "$out/kernelbench.txt" | tail -1)"
    [[ -n "$line" ]] && record "kernelbench $row (n ok s /h)" "$(awk '{print $(NF-3), $(NF-2), $(NF-1), $NF}' <<<"$line")"
  done
  local harness="builtin per-process harness"
  [[ -n "$kb_dir" ]] && harness="KernelBench's eval_kernel_against_ref"
  line="$(grep '^throughput kforge' "$out/kernelbench.txt" | tail -1)"
  [[ -n "$line" ]] && record "kernelbench throughput ratio" "$(awk '{print $NF}' <<<"$line") (baseline: $harness)"
  line="$(grep '^kforge correct but NOT TIMED' "$out/kernelbench.txt" | tail -1)"
  record "kernelbench correct but not timed (must be 0)" "$([[ -n "$line" ]] && echo "${line##*: }" || echo 0)"
  return 0
}

compare_kernel() {
  echo "== the judge's fused comparison: GPU tests, then torch path vs fused kernel"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu.py \
    -k "fused_comparison or zygote_on_gpu" 2>&1 | tee "$out/pytest-compare.log" | tail -5
  record "fused comparison pytest (GPU)" "$(grep -E 'passed|failed' "$out/pytest-compare.log" | tail -1)"
  "$py" bench/compare_kernel.py --device "$KFORGE_TEST_DEVICE" --json "$out/compare_kernel.json" \
    2>&1 | tee "$out/compare_kernel.log" | tail -12
  local line
  while read -r line; do
    record "compare $(awk '{print $1, $2}' <<<"$line") elements: torch / fused ms" \
      "$(awk '{print $4, "/", $5, "=", $6}' <<<"$line")"
  done < <(grep -E '^(float32|float16) ' "$out/compare_kernel.log")
}

warmup_interference() {
  echo "== benchmark: does warming the next job processes disturb a running job's timing?"
  "$py" bench/timing_interference.py --device "$KFORGE_TEST_DEVICE" --jobs 12 2>&1 |
    tee "$out/interference.log" | tail -8
  record "timing busy/quiet (warm-up interference)" "$(grep '^busy / quiet' "$out/interference.log" | awk '{print $NF}')"
  record "reference timing busy/quiet" "$(grep '^reference busy / quiet' "$out/interference.log" | awk '{print $NF}')"
}

if [[ -n "${ONLY_COMPARE:-}" ]]; then
  compare_kernel
  summary
  exit 0
fi

if [[ -n "${ONLY_KERNELBENCH:-}" ]]; then
  kernelbench
  summary
  exit 0
fi

if [[ -n "${ONLY_LATENCY:-}" ]]; then
  echo "== back to back: cached cuda evaluations, Python Triton compares, a process's end"
  "$py" bench/cuda_latency.py --device "$KFORGE_TEST_DEVICE" --jobs 30 --skip-load-inline \
    --out "$out/cuda_latency.json" 2>&1 | tee "$out/cuda-latency.log" | tail -10
  record "cuda parts p50 (ms)" "$(grep '^cuda cached jobs, p50' "$out/cuda-latency.log" | cut -d: -f2-)"
  record "cuda cached p50 (back to back) vs 0.15 s" "$(grep '^cuda cached p50' "$out/cuda-latency.log" | awk '{print $4" s "$NF}')"
  record "cuda eval first/cached p50/cached p95 (s)" "$(grep '^cuda (native' "$out/cuda-latency.log" | awk '{print $(NF-2)" / "$(NF-1)" / "$NF}')"
  "$py" bench/eval_latency.py --device "$KFORGE_TEST_DEVICE" --jobs 30 --baseline-jobs 0 \
    --out "$out/eval_latency.json" 2>&1 | tee "$out/eval-latency.log" | tail -5
  record "Python compare p50 / p95 (s), 3 warm" "$(grep '^kforge' "$out/eval-latency.log" | grep -v 'of each part' | awk '{print $(NF-2)" / "$(NF-1)}')"
  record "Python parts p50 (ms)" "$(grep 'p50 of each part' "$out/eval-latency.log" | cut -d: -f2-)"
  "$py" bench/process_teardown.py 2>&1 | tee "$out/teardown.log" | tail -3
  record "CUDA process SIGKILL -> reaped (ms)" "$(grep '^context ' "$out/teardown.log" | sed 's/.*reaped median *\([0-9.]*\).*/\1/')"
  warmup_interference
  summary
  exit 0
fi

if [[ -n "${ONLY_FIDELITY:-}" ]]; then
  fidelity
  summary
  exit 0
fi

if [[ -n "${MULTI_GPU:-}" ]]; then
  echo "== two GPUs: spread, a job pinned to cuda:1, CUDA_VISIBLE_DEVICES"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/integration/test_multi_gpu.py 2>&1 |
    tee "$out/pytest-multi-gpu.log" | tail -5
  record "multi-GPU pytest" "$(grep -E 'passed|failed' "$out/pytest-multi-gpu.log" | tail -1)"
  echo "== benchmark: a mixed batch on one GPU vs every GPU"
  for size in small large; do
    "$py" bench/multi_gpu_throughput.py --jobs "${MULTI_GPU_JOBS:-24}" --size "$size" \
      --out "$out/multi_gpu-$size.json" 2>&1 | tee "$out/multi_gpu-$size.log" | tail -6
    record "all GPUs vs one, $size jobs (target >= 1.8x)" "$(grep '^one / all' "$out/multi_gpu-$size.log" | cut -d= -f2-)"
    record "  jobs per device" "$(grep '^jobs per device' "$out/multi_gpu-$size.log" | sed 's/.*(all GPUs) //')"
  done
  summary
  exit 0
fi

if [[ -n "${ONLY_BATCH:-}" ]]; then
  part="${ONLY_BATCH_PART:-all}"
  want() { [[ "$part" == all || "$part" == "$1" ]]; }
  if want batch; then
  echo "== batches on $KFORGE_TEST_DEVICE: POST /batch, reference reuse, SSE, MCP batch_compare"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/integration/test_batch.py 2>&1 |
    tee "$out/pytest-batch.log" | tail -5
  record "batch pytest" "$(grep -E 'passed|failed' "$out/pytest-batch.log" | tail -1)"
  fi
  if want wire; then
  echo "== the judge <-> candidate wire on the GPU (tests/python/test_wire.py, then one 64 MiB tensor)"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/python/test_wire.py 2>&1 |
    tee "$out/pytest-wire.log" | tail -3
  record "wire pytest" "$(grep -E 'passed|failed' "$out/pytest-wire.log" | tail -1)"
  "$py" bench/wire_throughput.py --device "$KFORGE_TEST_DEVICE" 2>&1 | tee "$out/wire.log" | tail -9
  record "wire round trip 64 MiB: arena (ms)" "$(grep '^round trip: wire, arena' "$out/wire.log" | awk '{print $(NF-3)}')"
  record "wire round trip 64 MiB: memfd per tensor (ms)" "$(grep '^round trip: wire, memfd' "$out/wire.log" | awk '{print $(NF-3)}')"
  fi
  if want batch; then
  echo "== benchmark: one batch of 16 candidates vs 16 separate compares"
  "$py" bench/batch_throughput.py --device "$KFORGE_TEST_DEVICE" --candidates 16 --rounds "${BATCH_ROUNDS:-1}" \
    --pipeline-depth "${BATCH_PIPELINE_DEPTH:-3}" --sequential \
    --out "$out/batch_throughput.json" 2>&1 | tee "$out/batch_throughput.log" | tail -6
  record "batch of 16 vs 16 compares at once (target >= 4x)" "$(grep '^separate / batch' "$out/batch_throughput.log" | awk '{print $NF}')"
  record "batch of 16 vs 16 compares one after another" "$(grep '^sequential / batch' "$out/batch_throughput.log" | awk '{print $NF}')"
  fi
  if want problem; then
  problem="${BATCH_PROBLEM:-kernelbench/KernelBench/level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py}"
  echo "== benchmark: a batch of 16 candidates of a KernelBench problem ($problem, torch vs torch)"
  "$py" bench/batch_throughput.py --device "$KFORGE_TEST_DEVICE" --candidates 16 --rounds 1 \
    --pipeline-depth "${BATCH_PIPELINE_DEPTH:-3}" --sequential --problem "$problem" \
    --out "$out/batch_problem.json" 2>&1 | tee "$out/batch_problem.log" | tail -8
  record "KernelBench batch of 16 vs 16 compares at once" "$(grep '^separate / batch' "$out/batch_problem.log" | awk '{print $NF}')"
  record "KernelBench batch of 16 vs one after another" "$(grep '^sequential / batch' "$out/batch_problem.log" | awk '{print $NF}')"
  fi
  if want interference; then
  echo "== benchmark: a kernel's timing alone vs under concurrent compile load"
  "$py" bench/interference.py --device "$KFORGE_TEST_DEVICE" --jobs "${INTERFERENCE_JOBS:-6}" --pipeline-depth 3 \
    --pipeline-jobs 6 2>&1 | tee "$out/interference-compile.log" | tail -22
  record "timing loaded / alone (compile load)" "$(grep '^loaded / alone' "$out/interference-compile.log" | cut -d= -f2-)"
  record "cuda pipelined / alone (--pipeline-depth 3)" "$(grep '^cuda: pipelined / alone' "$out/interference-compile.log" | cut -d= -f2-)"
  record "triton pipelined / alone (--pipeline-depth 3)" "$(grep '^triton: pipelined / alone' "$out/interference-compile.log" | cut -d= -f2-)"
  record "pipelined exclusive grants overlapping (must be 0)" "$(grep '^exclusive grants seen' "$out/interference-compile.log" | awk '{print $NF}')"
  echo "== pipelined stages: tests/integration/test_pipeline.py"
  "$py" -m pytest -q -rs -p no:cacheprovider tests/integration/test_pipeline.py 2>&1 |
    tee "$out/pytest-pipeline.log" | tail -5
  record "pipeline pytest" "$(grep -E 'passed|failed' "$out/pytest-pipeline.log" | tail -1)"
  fi
  summary
  exit 0
fi

[[ -n "${ONLY_WORKBENCH:-}" ]] && { SKIP_TRUST=1; SKIP_WORKER_TESTS=1; ONLY_CUDA=1; SKIP_CUDA=1; }
if [[ -z "${SKIP_TRUST:-}" && -z "${ONLY_KERNELS:-}" ]]; then
echo "== sandbox: hostile jobs (cpu device on this host, jailed as root)"
KFORGE_TEST_DEVICE=cpu "$py" -m pytest -q -p no:cacheprovider tests/hostile 2>&1 |
  tee "$out/pytest-hostile.log" | tail -3
record "hostile jobs (tests/hostile)" "$(grep -E 'passed|failed' "$out/pytest-hostile.log" | tail -1)"
echo "== adversarial corpus on $KFORGE_TEST_DEVICE (load_inline and CuPy controls included)"
"$py" tests/adversarial/run.py --device "$KFORGE_TEST_DEVICE" --json "$out/adversarial.json" 2>&1 |
  tee "$out/adversarial.log" | tail -32
record "adversarial corpus" "$(tail -1 "$out/adversarial.log")"
fi
[[ -n "${ONLY_TRUST:-}" ]] && { SKIP_WORKER_TESTS=1; ONLY_CUDA=1; SKIP_CUDA=1; }

if [[ -z "${SKIP_WORKER_TESTS:-}" && -z "${ONLY_CUDA:-}" && -z "${ONLY_KERNELS:-}" ]]; then
  echo "== worker package tests (GPU tests included)"
  "$py" -m pytest -q -p no:cacheprovider tests/python 2>&1 | tee "$out/pytest-worker.log" | tail -3
  record "worker pytest (tests/python)" "$(grep -E 'passed|failed' "$out/pytest-worker.log" | tail -1)"
fi

# The MCP client tooling: no Node here (its tests run on CI only); the Python SDK from the
# wheels scripts/package-gpu.sh carries, in a venv over the host's packages.
[[ -x tests/mcp-node/node_modules/.bin/node ]] || export KFORGE_NO_NODE=1
# The venv sees the host's whole sys.path (user site included) through a .pth file, after its
# own site-packages, so pip adds only what the host lacks.
test_py="$py"
test_venv="${TMPDIR:-/tmp}/kforge-test-venv"
if [[ -d build/gpu/wheels ]] && "$py" -m venv --system-site-packages "$test_venv" >/dev/null 2>&1 &&
  "$py" -c 'import sys; print("\n".join(p for p in sys.path if p))' \
    >"$("$test_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/host.pth" &&
  "$test_venv/bin/python" -m pip install -q --no-index --find-links build/gpu/wheels \
    $(grep -E '^(mcp|openapi-spec-validator)==' python/requirements.txt) >"$out/mcp-sdk-install.log" 2>&1; then
  test_py="$test_venv/bin/python"
else
  echo "(no MCP Python SDK here: its tests run on CI only)"
  export KFORGE_NO_MCP_SDK=1
fi

if [[ -z "${ONLY_CUDA:-}" && -z "${ONLY_KERNELS:-}" ]]; then
echo "== integration tests against the real server on $KFORGE_TEST_DEVICE"
dropin_tests=(tests/integration/test_python_client.py tests/integration/test_legacy_requests.py)
"$test_py" -m pytest -q -p no:cacheprovider tests/integration --ignore-glob='*/test_cuda_*' \
  "${dropin_tests[@]/#/--ignore=}" --ignore=tests/integration/test_workbench.py \
  --ignore=tests/integration/test_timing_fields.py 2>&1 |
  tee "$out/pytest-integration.log" | tail -15
record "integration pytest on $KFORGE_TEST_DEVICE" "$(grep -E 'passed|failed' "$out/pytest-integration.log" | tail -1)"
record "  not run here (CI only)" "${KFORGE_NO_NODE:+Node: conformance, TS SDK }${KFORGE_NO_MCP_SDK:+MCP Python SDK}"

timing_fields "$test_py"

echo "== the old server's users: kernel_eval_client examples and request files on $KFORGE_TEST_DEVICE"
"$test_py" -m pytest -q -p no:cacheprovider "${dropin_tests[@]}" 2>&1 |
  tee "$out/pytest-dropin.log" | tail -15
record "client examples + legacy request files" "$(grep -E 'passed|failed' "$out/pytest-dropin.log" | tail -1)"

echo "== benchmark: end-to-end eval latency vs fresh-process baseline"
"$py" bench/eval_latency.py --device "$KFORGE_TEST_DEVICE" --jobs 30 --baseline-jobs "${BASELINE_JOBS:-3}" \
  --kernel-cache isolated,shared --out "$out/eval_latency.json" 2>&1 | tee "$out/bench.log" | tail -8
for cache in isolated shared; do
  record "bench kforge p50 / p95 (s), $cache caches" "$(grep "^kforge.*$cache caches" "$out/bench.log" | awk '{print $(NF-2)" / "$(NF-1)}')"
done
record "bench baseline p50 / p95 (s)" "$(grep '^baseline' "$out/bench.log" | awk '{print $(NF-2)" / "$(NF-1)}')"
record "bench p50 ratio (isolated, shared)" "$(grep '^p50 ratio' "$out/bench.log" | awk '{print $NF}' | tr '\n' ' ')"

warmup_interference

fi

if [[ (-z "${ONLY_CUDA:-}" || -n "${ONLY_WORKBENCH:-}") && -z "${ONLY_KERNELS:-}" ]]; then
if [[ -z "${KFORGE_NO_MCP_SDK:-}" ]]; then
echo "== Triton workbench: a whole agent session on $KFORGE_TEST_DEVICE (softmax v1 wrong, v2/v3 right)"
"$test_py" -m pytest -q -s -p no:cacheprovider tests/integration/test_workbench.py 2>&1 |
  tee "$out/workbench.log" | tail -8
record "workbench tests on $KFORGE_TEST_DEVICE" "$(grep -E 'passed|failed' "$out/workbench.log" | tail -1)"
record "  session" "$(grep -o '^workbench session.*' "$out/workbench.log" | tail -1 | cut -c1-240)"
else
record "workbench tests" "not run: no MCP Python SDK here (build/gpu/wheels)"
fi
fi

if [[ -z "${SKIP_CUDA:-}" && -z "${ONLY_KERNELS:-}" ]]; then
echo "== cuda kernels (native worker, NVRTC, C ABI) against the real server on $KFORGE_TEST_DEVICE"
"$py" -m pytest -q -p no:cacheprovider tests/integration/test_cuda_*.py 2>&1 |
  tee "$out/pytest-cuda.log" | tail -15
record "cuda pytest on $KFORGE_TEST_DEVICE" "$(grep -E 'passed|failed' "$out/pytest-cuda.log" | tail -1)"
"$py" -m pytest -q -p no:cacheprovider tests/python/test_cuda_abi.py 2>&1 |
  tee "$out/pytest-cuda-abi.log" | tail -5
record "cuda C ABI pytest (tests/python)" "$(grep -E 'passed|failed' "$out/pytest-cuda-abi.log" | tail -1)"

echo "== benchmark: cuda evaluation latency (NVRTC, native worker) vs the Python paths"
"$py" bench/cuda_latency.py --device "$KFORGE_TEST_DEVICE" --jobs 30 --out "$out/cuda_latency.json" 2>&1 |
  tee "$out/cuda-latency.log" | tail -10
cuda_row() { grep "^$1" "$out/cuda-latency.log" | awk '{print $(NF-2)" / "$(NF-1)" / "$NF}'; }
record "cuda eval first/cached p50/cached p95 (s)" "$(cuda_row 'cuda (native')"
record "cupy eval first/cached p50/p95 (s)" "$(cuda_row 'cupy')"
record "torch_cuda eval first/cached p50/p95 (s)" "$(cuda_row 'torch_cuda')"
record "cuda cached p50 (back to back) vs 0.15 s" "$(grep '^cuda cached p50' "$out/cuda-latency.log" | awk '{print $4" s "$NF}')"
"$py" bench/cuda_latency.py --device "$KFORGE_TEST_DEVICE" --n 1048576 --jobs 20 --skip-load-inline \
  2>&1 | tee "$out/cuda-latency-1m.log" | tail -6
record "1M-element cuda eval first/p50/p95 (s)" "$(grep '^cuda (native' "$out/cuda-latency-1m.log" | awk '{print $(NF-2)" / "$(NF-1)" / "$NF}')"
record "1M-element cupy eval first/p50/p95 (s)" "$(grep '^cupy' "$out/cuda-latency-1m.log" | awk '{print $(NF-2)" / "$(NF-1)" / "$NF}')"
"$py" bench/cuda_latency.py --device "$KFORGE_TEST_DEVICE" --pause-s 0.5 --jobs 20 --python-jobs 10 \
  --skip-load-inline 2>&1 | tee "$out/cuda-latency-paused.log" | tail -6
record "cuda eval 0.5 s apart first/p50/p95 (s)" "$(grep '^cuda (native' "$out/cuda-latency-paused.log" | awk '{print $(NF-2)" / "$(NF-1)" / "$NF}')"
record "cupy eval 0.5 s apart first/p50/p95 (s)" "$(grep '^cupy' "$out/cuda-latency-paused.log" | awk '{print $(NF-2)" / "$(NF-1)" / "$NF}')"

echo "== kforge timing vs ncu gpu__time_duration (memory-bound cuda kernel)"
"$py" bench/cuda_ncu_check.py --kforge "$KFORGE_BIN" 2>&1 | tee "$out/ncu.log" | tail -5
record "memory-bound kernel kforge / ncu (us)" "$(grep '^kforge vs ncu (us):' "$out/ncu.log" | cut -d: -f2-)"
fi

if [[ -z "${SKIP_KERNELS:-}" && -z "${ONLY_CUDA:-}" ]]; then
echo "== kernel library: every version of every op against torch on $KFORGE_TEST_DEVICE (all dtypes)"
"$py" -m pytest -q -p no:cacheprovider tests/kernels 2>&1 | tee "$out/pytest-kernels.log" | tail -5
record "kernel library pytest on $KFORGE_TEST_DEVICE" "$(grep -E 'passed|failed' "$out/pytest-kernels.log" | tail -1)"

ops="${KERNEL_OPS:-add,softmax,gelu,layer_norm,mha}"
bench_out="$out/bench-${ops//,/-}"
echo "== kforge bench: $ops; 4 versions; small, medium, large; 10 runs"
rm -rf "$bench_out"
"$KFORGE_BIN" bench --ops "$ops" --device "$KFORGE_TEST_DEVICE" --out "$bench_out" \
  --data-dir "${TMPDIR:-/tmp}/kforge-bench-data" --python "$py" 2>&1 | tee "$bench_out.log" | tail -12
if [[ -f "$bench_out/bench.json" ]]; then
  for op in ${ops//,/ }; do
    echo "-- $op"
    sed -n '/^## Phase 3: Benchmark results/,/^Median/p' "$bench_out/${op}_log.md" | grep '^|'
  done
  "$py" bench/kernel_targets.py "$bench_out/bench.json" --tsv "$bench_out/targets.tsv" |
    tee "$bench_out/targets.txt"
  record "kforge bench ($ops)" "logs in $bench_out/"
  while IFS=$'\t' read -r target measured verdict; do
    record "  $target" "$measured $verdict"
  done < "$bench_out/targets.tsv"
else
  record "kforge bench ($ops)" "no report: see $bench_out.log"
fi
fi

if [[ -z "${SKIP_FIDELITY:-}" && -z "${ONLY_CUDA:-}" && -z "${ONLY_KERNELS:-}" ]]; then
  fidelity
fi

if [[ -z "${SKIP_KERNELBENCH:-}" && -z "${ONLY_CUDA:-}" && -z "${ONLY_KERNELS:-}" ]]; then
  compare_kernel
  kernelbench
fi

echo
echo "== gpu-check summary ($(head -1 "$out/gpu.txt"))"
for i in "${!names[@]}"; do printf '%-44s %s\n' "${names[$i]}" "${results[$i]}"; done
