"""The kernel evaluation server's client package name, served by kforge_client, so code
written for the old server (`from kernel_eval_client import ...`) runs unchanged."""

from kforge_client import *  # noqa: F403
from kforge_client import __all__, __version__  # noqa: F401
