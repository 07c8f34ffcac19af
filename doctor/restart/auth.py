"""The job's store key: every value the wrapper writes to its TCPStore carries an HMAC.

A ``TCPStore`` has no authentication: anyone who reaches its port can set any
key. The wrapper's store decides restarts, so every value is sealed with
HMAC-SHA256 over the store key's name and the value, keyed by a per-job secret
(a value cannot be forged, nor moved from one key to another); unsealed,
malformed or forged values are ignored as if absent. Every name holds the run's
nonce and the iteration (``doctor.restart.handshake``): a value recorded in one
run, or one iteration, fails the seal in any other.

The secret never appears on a command line: it is ``$NCCL_DOCTOR_STORE_KEY``
(hex, for jobs whose hosts share no directory) or the file ``store.key`` in the
job's private directory, created once (0600, atomically) by initial rank 0 and
read by the others. Every rank of a multi-host job must see the same secret:
give ``NCCL_DOCTOR_JOB_DIR`` on a shared filesystem or the environment
variable (a rank that cannot says so at start: ``handshake``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path

from doctor.trust.safeio import UnsafePath, create_exclusive, private_dir, read_text

KEY_ENV = "NCCL_DOCTOR_STORE_KEY"
KEY_FILE = "store.key"
_HEX_KEY = re.compile(r"[0-9a-fA-F]{32,128}")
_MAC_HEX = 64


class StoreKeyError(UnsafePath):
    """No usable store key (a malformed ``NCCL_DOCTOR_STORE_KEY`` or key file)."""


def job_key(directory: Path, env: Mapping[str, str]) -> bytes:
    """The job's secret as initial rank 0 holds it: the environment's, else the job
    directory's (created if absent; one left by an earlier run of the job is reused, which
    is safe because every run seals under its own nonce)."""
    given = env.get(KEY_ENV, "").strip()
    if given and not _HEX_KEY.fullmatch(given):
        raise StoreKeyError(f"{KEY_ENV} must be 32 to 128 hex digits")
    path = private_dir(directory) / KEY_FILE
    if not given:
        create_exclusive(path, secrets.token_hex(32))
    elif not path.exists():  # recover on this host reads the file
        create_exclusive(path, given)
    return (given or read_key_file(directory)).encode()


def peer_key(directory: Path, env: Mapping[str, str]) -> bytes | None:
    """The job's secret as the other ranks find it (they never create one): the
    environment's, else the job directory's key file; None while there is none."""
    given = env.get(KEY_ENV, "").strip()
    if given:
        if not _HEX_KEY.fullmatch(given):
            raise StoreKeyError(f"{KEY_ENV} must be 32 to 128 hex digits")
        return given.encode()
    try:
        return read_key_file(private_dir(directory)).encode()
    except FileNotFoundError:
        return None


def key_id(key: bytes) -> str:
    """A name for the key that ranks may publish to compare keys (a hash; reveals nothing)."""
    return hashlib.sha256(b"nccl-doctor store key id\0" + key).hexdigest()[:16]


def read_key_file(directory: Path, owner: int | None = None) -> str:
    """The key file of a job directory (of ``owner``, default this user)."""
    text = read_text(directory / KEY_FILE, 256, owner).strip()
    if not _HEX_KEY.fullmatch(text):
        raise StoreKeyError(f"{directory / KEY_FILE} does not hold a store key")
    return text


class Sealer:
    """Seals and opens the values of one job's store."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._warned = False

    def _mac(self, name: str, value: str) -> str:
        message = name.encode() + b"\0" + value.encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def seal(self, name: str, value: str) -> str:
        return f"{self._mac(name, value)}:{value}"

    def open(self, name: str, sealed: bytes | str) -> str | None:
        """The value if its seal is right for ``name``; None for anything else."""
        try:
            text = sealed.decode() if isinstance(sealed, bytes) else sealed
        except UnicodeDecodeError:
            return None
        mac, sep, value = text.partition(":")
        if sep and len(mac) == _MAC_HEX and hmac.compare_digest(mac, self._mac(name, value)):
            return value
        self._warn_once()
        return None

    def _warn_once(self) -> None:
        if not self._warned:
            self._warned = True
            print(
                "nccl-doctor wrapper: ignored a store value that failed authentication "
                "(someone else wrote to the store, or a host with another key: share one "
                f"with {KEY_ENV} or NCCL_DOCTOR_JOB_DIR on a shared filesystem)",
                file=sys.stderr,
                flush=True,
            )


def new_key() -> bytes:
    """A fresh secret, for stores that no other process needs to reach (tests, one rank)."""
    return os.urandom(32).hex().encode()
