"""Settings for ``make run`` and the shell: the environment decides embedded or servers."""

from .base import *  # noqa: F403
