"""timing: measuring a kernel; no kernel loading, no verdict, no process of its own.

- timing.py: the trial protocol (warm-up, L2 flush, the spin that hides the launch, CUDA events,
  CUDA graphs, the cpu's wall clock) and the adaptive trial loop
- stats.py: the statistics of the trials, the stop rule, a speedup's interval, the warnings
- activity.py: the kernel activity of the timed window, by the profiler's clock (a profiled pass)
- activity_wire.py: the candidate's profiled pass on the wire and the judge's cross-check of it
- device_metrics.py: the timed kernel once more under Nsight Compute (the replay is the
  candidate room's replay.py)
- peaks.py: the device's measured bandwidth and GEMM FLOP/s for the roofline

May import: core.
"""
