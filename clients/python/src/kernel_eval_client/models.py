"""kernel_eval_client.models: the old module path of kforge_client.models."""

from kforge_client.models import *  # noqa: F403
