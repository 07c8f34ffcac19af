"""Errors that the CLI turns into exit codes.

Library code raises; only ``doctor.cli`` turns a ``DoctorError`` into an exit
code and one printed sentence, so no user ever sees a traceback for bad input.

    DoctorError                 exit 2 unless a subclass says otherwise
    ├── UsageError              a bad flag or combination of flags
    ├── ConfigError             unreadable or malformed config (names key and line)
    ├── InputError              unreadable evidence, a path that does not exist
    ├── NoSuchJobError          --job names no running job on this host
    └── TorchMissing            an in-rank part (wrapper, bench, demo) without PyTorch
                                (also an ImportError, for ``import doctor.restart``)

Exit codes (a contract: launch scripts gate on them):

    0  nothing at fail (warnings allowed unless --strict)
    1  something at fail (preflight) or a hang was found (triage/analyze)
    2  usage or input error
   93  the job's watcher stopped the job and it must not be requeued (a deterministic bug;
       the code NVIDIA's launcher uses for "do not requeue")
   94  the job's watcher stopped the job: requeue it without the host it names
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_NO_REQUEUE = 93
EXIT_REQUEUE_WITHOUT_HOST = 94


class DoctorError(Exception):
    """Base of every error the CLI reports as one sentence."""

    exit_code: int = EXIT_USAGE


class UsageError(DoctorError):
    """A bad flag value or an impossible combination of flags."""


class ConfigError(DoctorError):
    """The config file is unreadable, malformed, or has an unknown key or wrong type."""


class InputError(DoctorError):
    """Evidence or a path given on the command line cannot be used."""


class NoSuchJobError(DoctorError):
    """No rank of the named job runs on this host."""


class TorchMissing(DoctorError, ImportError):
    """PyTorch is not installed here, and this part of nccl-doctor runs inside a rank."""
