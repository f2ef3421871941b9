"""core: what every process of a job shares, below every other room.

- spec.py: the job spec the supervisor sends, as typed values (docs/worker-protocol.md "Job spec")
- protocol.py: message framing on the supervisor's sockets and the judge <-> candidate socket
- devinfo.py: the device a process runs on (`--device`), its description and versions
- phases.py: the per-phase wall times of a job (`phases_ms`)
- devmem.py: GPU memory one process hands another as a descriptor (CUDA's virtual memory API)
- inputs.py: a kernel's arguments, from its IOContract or from get_inputs(), seeded by the job

May import: nothing.
"""
