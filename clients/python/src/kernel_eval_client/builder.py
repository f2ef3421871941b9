"""kernel_eval_client.builder: the old module path of kforge_client.builder.

The old module also imported the models it builds, so `from kernel_eval_client.builder import
LaunchConfig` worked; it still does."""

from kforge_client.builder import *  # noqa: F403
from kforge_client.models import (  # noqa: F401
    ArgSpec,
    IOContract,
    LaunchConfig,
    LaunchDim,
    TensorSpec,
)
