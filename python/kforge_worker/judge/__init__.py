"""judge: the job's verdict, computed in the judge process, which never imports the candidate's
code: loading both kernels, the correctness trials, the judged timing of the candidate, the
reference's timing, and the result.

- evaluate.py: the job pipeline (run_job): load, check correctness, time, report
- kernels.py: a job's loaded kernels (the reference here, the candidate remote) and its inputs
- link.py: the judge's side of the candidate process: starting it, and each request
- correctness.py: the correctness trials, judged here
- judged.py: the judged trials' protocol and the judge's side of it (its clock, its echo)
- timed.py: the candidate's timing phase; timed_verdict.py: the verdict on its judged run
- reference_timing.py: the reference's timing; reference_reuse.py: its results reused in a batch
- results.py: the job's result as typed values, and its wire form
- device_grant.py: the exclusive device grant around the timed regions of a pipelined job

May import: core, check, timing, candidate, process.
"""
