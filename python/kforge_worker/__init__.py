"""kforge's Python worker: runs torch, torch_cuda, triton and multi_kernel jobs.

The C++ supervisor starts `python -m kforge_worker zygote --device ...`; the zygote forks
one child per job: the judge, which starts the candidate process (the only one that imports
the candidate's code). The wire contract is docs/worker-protocol.md.
"""

PROTOCOL_VERSION: tuple[int, int] = (2, 0)
WORKER_NAME = "python"
KERNEL_TYPES: tuple[str, ...] = ("torch", "torch_cuda", "triton", "multi_kernel")
