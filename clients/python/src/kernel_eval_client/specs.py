"""kernel_eval_client.specs: the old module path of kforge_client.specs."""

from kforge_client.specs import *  # noqa: F403
