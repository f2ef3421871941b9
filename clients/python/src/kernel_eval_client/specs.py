"""kernel_eval_client.specs: the old module path of kforge_client.specs.

The old module also imported the models its helpers make, so `from kernel_eval_client.specs
import KernelCode` worked; it still does."""

from kforge_client.models import (  # noqa: F401
    ArgSpec,
    IOContract,
    KernelCode,
    LaunchConfig,
    TensorInit,
    TensorSpec,
)
from kforge_client.specs import *  # noqa: F403
