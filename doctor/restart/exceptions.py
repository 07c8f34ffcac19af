"""Exceptions of the restart wrapper.

BaseException
└── RestartRequested      raised asynchronously into the main thread to unwind the
                          wrapped function; a BaseException so ``except Exception``
                          in user code does not swallow it
RuntimeError
└── RestartError          the wrapper cannot go on (barrier timeout, declared dead)
    ├── RestartLimitError the retry limit (``max_iterations``) was reached
    ├── KeyMismatch       ranks of the job hold different store keys (or none)
    ├── StoreTampered     another client of the store deleted or rewrote a key
    ├── StoreAbandoned    a monitor process stopped waiting for the store: its rank
    │                     exited before the store came up
    └── StoppedByDoctor   the job's watcher stopped the job (or excluded this rank)
                          instead of restarting it; carries the exit code
"""

from __future__ import annotations


class RestartRequested(BaseException):
    """Unwinds the wrapped function so that every healthy rank can restart it."""


class RestartError(RuntimeError):
    """The wrapper gave up: this rank cannot take part in another iteration."""


class RestartLimitError(RestartError):
    """Every rank stops because the job reached ``max_iterations`` iterations."""


class KeyMismatch(RestartError):
    """Ranks of the job hold different store keys (or none): they could never meet."""


class StoreTampered(RestartError):
    """A key the wrapper relies on was deleted or rewritten by another client of the store:
    reported and fatal, never waited out."""


class StoreAbandoned(RestartError):
    """The caller stopped waiting for the store because there is nothing left to report."""


class StoppedByDoctor(RestartError):
    """The watcher's verdict ends this rank: the job stops (``exit_code`` 93: do not requeue;
    94: requeue without a host) or this rank was excluded (0: the job goes on without it)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
