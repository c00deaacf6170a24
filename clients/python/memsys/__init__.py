"""memsys's Python client (``memsys.client``) and framework integrations (``memsys.integrations``).

The client needs only httpx, pydantic and tqdm; an integration imports its framework when it is imported.
"""

from memsys.client import AsyncMemsys, Memsys
from memsys.errors import (
    ConnectionFailed,
    Forbidden,
    InvalidParameter,
    MemsysError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    RequestTimeout,
    ServerError,
    Unauthorized,
    Unavailable,
)
from memsys.retries import RetryPolicy

__all__ = [
    "AsyncMemsys",
    "ConnectionFailed",
    "Forbidden",
    "InvalidParameter",
    "Memsys",
    "MemsysError",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RequestTimeout",
    "RetryPolicy",
    "ServerError",
    "Unauthorized",
    "Unavailable",
]
