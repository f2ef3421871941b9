"""kforge's Python worker: runs torch, torch_cuda, triton and multi_kernel jobs.

The C++ supervisor starts `python -m kforge_worker zygote --device ...`; the zygote forks
one child per job: the judge, which starts the candidate process (the only one that imports
the candidate's code). The wire contract is docs/worker-protocol.md.

The modules live in rooms, from the bottom: core/, check/ and timing/, candidate/, process/,
judge/; each room's __init__.py says what it holds and which rooms it may import
(tests/python/test_import_graph.py holds them to it). At this top level: the command line
(__main__.py), the zygote (zygote.py) and the child it forks per job (child.py), which may
import every room and which no room imports.
"""

PROTOCOL_VERSION: tuple[int, int] = (2, 0)
WORKER_NAME = "python"
