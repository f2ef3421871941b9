"""The workbench's knowledge base, checked in-process on the CPU (Triton's interpreter, chosen
before triton is imported). The same snippets also run as real jobs through the workbench's
MCP tools in tests/integration/test_workbench_knowledge.py."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
