"""kernel_eval_client.builder: the old module path of kforge_client.builder."""

from kforge_client.builder import *  # noqa: F403
