"""kernel_eval_client.client: the old module path of kforge_client.client.

The old module also imported KernelCode and RuntimeStats, so `from kernel_eval_client.client
import KernelCode` worked; it still does."""

from kforge_client.client import *  # noqa: F403
from kforge_client.models import KernelCode, RuntimeStats  # noqa: F401
