"""Exceptions of the restart wrapper.

BaseException
└── RestartRequested      raised asynchronously into the main thread to unwind the
                          wrapped function; a BaseException so ``except Exception``
                          in user code does not swallow it
RuntimeError
└── RestartError          the wrapper cannot go on (barrier timeout, declared dead)
    ├── RestartLimitError the retry limit (``max_iterations``) was reached
    └── StoreAbandoned    a monitor process stopped waiting for the store: its rank
                          exited before the store came up
"""

from __future__ import annotations


class RestartRequested(BaseException):
    """Unwinds the wrapped function so that every healthy rank can restart it."""


class RestartError(RuntimeError):
    """The wrapper gave up: this rank cannot take part in another iteration."""


class RestartLimitError(RestartError):
    """Every rank stops because the job reached ``max_iterations`` iterations."""


class StoreAbandoned(RestartError):
    """The caller stopped waiting for the store because there is nothing left to report."""
