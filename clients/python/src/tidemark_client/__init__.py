"""tidemark-client: Tidemark's REST API and watchdog pings from Python, and the
``tidemark`` command line (``tidemark_client.cli``)."""

__version__ = "0.1.0"

from .client import Client
from .errors import (
    FieldProblem,
    PartitionFailed,
    ProblemError,
    TidemarkError,
    TransportError,
    WaitTimeout,
)
from .models import Dataset, DatasetRef, Partition, PingResult, PublishResult
from .retries import RetryPolicy

__all__ = [
    "Client",
    "Dataset",
    "DatasetRef",
    "FieldProblem",
    "Partition",
    "PartitionFailed",
    "PingResult",
    "ProblemError",
    "PublishResult",
    "RetryPolicy",
    "TidemarkError",
    "TransportError",
    "WaitTimeout",
    "__version__",
]
