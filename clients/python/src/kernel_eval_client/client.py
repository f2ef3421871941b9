"""kernel_eval_client.client: the old module path of kforge_client.client."""

from kforge_client.client import *  # noqa: F403
