"""``python -m tidemark_client``: the ``tidemark`` command line."""

import sys

from .cli import main

sys.exit(main())
