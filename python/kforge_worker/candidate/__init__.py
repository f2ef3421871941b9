"""candidate: a kernel's code, loaded and called, and the candidate process that runs the
candidate's (docs/architecture.md "Threat model"). The judge loads the reference with the same
modules, and reaches the candidate process through the wire, the regions and the trials here.

- loaders.py: a kernel's source imported as a module and made a Runnable, per kernel_type
- tracebacks.py: a failure as the kernel's author should read it (no worker frames)
- cuda_abi.py: `cuda` kernels through the native backend's C ABI
- build.py: a loaded module built into a Runnable (a torch model under a fixed seed)
- binding.py: how a trial's arguments are passed to a kernel, poisoned and read back, and an
  invocation as a plan of slots for the candidate process
- wire.py, arena.py: values and tensors across the judge <-> candidate socket, and the host
  and device arenas large tensors travel through
- regions.py: the trial regions the judge owns and the candidate process maps
- trials.py: the candidate's side of the judged trials (its clock words, its trial loop)
- call_checks.py: what the candidate process watches around a call (launches, inputs, aliases)
- replay.py: a kernel rebuilt from a saved bundle and called once, for Nsight Compute
- server.py: the candidate process's request loop (`serve`)

May import: core, check, timing.
"""
