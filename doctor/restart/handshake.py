"""How the ranks of one run agree on the store key and on the run's nonce, or fail at once.

Initial rank 0 holds the key (``auth.job_key``: the environment's, else the job
directory's, created if absent) and draws a fresh nonce at start; every store
name of the run holds that nonce (``doctor/<attempt>/<nonce>/...``), so the
seal of every value covers it: a value recorded in an earlier run of the same
job id, replayed into this one, fails authentication. Rank 0 publishes the
nonce and the run's start time under ``doctor/<attempt>/run``, sealed.

Every rank also publishes an unsealed *hello* (its host and the key's id, a
hash) before anything else, so a rank whose key differs from rank 0's — or
that has none, because its host does not see rank 0's job directory — is
named within seconds by every rank, with the fix, instead of each rank
ignoring the others' values until the barrier times out. It cannot be sealed:
its reader is the rank that lacks the key, and the run's nonce is no secret
(the run record is readable by any client). A forged hello can only stop the
job at start with the sentence, which a client that deletes a key can do too;
it never lets a rank in without rank 0's sealed run record.

The other ranks never create a key: they wait (bounded) for the environment's
or the directory's, and for rank 0's run record.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.restart.auth import KEY_ENV, Sealer, key_id
from doctor.restart.exceptions import KeyMismatch, RestartError, StoreTampered
from doctor.restart.peek import peek
from doctor.trust.escape import escape_control

KEY_GRACE = 3.0
"""Seconds a rank waits for the key file once rank 0 has said hello: a shared filesystem
may show a new file late (NFS caches a missing name for a few seconds)."""
CLOCK_SKEW = 5.0
"""Seconds a fault record may predate the run's start (hosts' clocks differ a little)."""
POLL = 0.01


@dataclass(frozen=True)
class Run:
    """One run of the job: its nonce (in every store name) and when rank 0 drew it."""

    nonce: str = field(default_factory=lambda: secrets.token_hex(16))
    started: float = field(default_factory=time.time)
    store: str = ""
    """``host:port`` of the wrapper's store (under torchrun, not the agent's)."""

    def prefix(self, attempt_prefix: str) -> str:
        return f"{attempt_prefix}{self.nonce}/"


def fix(rank: int, host: str, other: int, other_host: str, has_key: bool) -> str:
    """The one sentence a rank of a job whose ranks hold different keys prints."""
    what = "holds a different store key than" if has_key else "finds no store key of"
    return (
        f"rank {rank} on {host} {what} rank {other} on {other_host}: ranks on several "
        f"hosts need one key, so set NCCL_DOCTOR_JOB_DIR to a directory every host shares, "
        f"or {KEY_ENV} to the same 64 hex digits on every rank "
        f"(`nccl-doctor launch` does neither for you across hosts)"
    )


class Handshake:
    """The hello and run records of one attempt, read and written on a raw store client."""

    def __init__(self, raw: Any, attempt_prefix: str, rank: int) -> None:
        self.raw, self.attempt, self.rank = raw, attempt_prefix, rank
        self.host = socket.gethostname()

    def _get(self, name: str) -> bytes | None:
        return peek(self.raw, self.attempt + name)

    def hello(self, key: bytes | None) -> None:
        text = json.dumps({"host": self.host, "key": key_id(key) if key else None})
        self.raw.set(f"{self.attempt}hello/{self.rank}", text)

    def peer(self, rank: int) -> tuple[str, str | None] | None:
        """(host, key id) of a rank that said hello; None before it did (or garbage)."""
        raw = self._get(f"hello/{rank}")
        try:
            said = json.loads(raw[:4096]) if raw is not None else None
        except ValueError:
            return None
        if not isinstance(said, dict) or not isinstance(said.get("host"), str):
            return None
        key = said.get("key")  # anyone may write a hello: its host is printed escaped
        return escape_control(said["host"][:255]), key if isinstance(key, str) else None

    def check_run(self, record: bytes) -> None:
        """Raise ``StoreTampered`` when the run record this rank adopted was deleted or
        rewritten (a replay of an earlier run's, slipped in before rank 0 wrote its own)."""
        now = self._get("run")
        if now != record:
            what = "vanished" if now is None else "was rewritten"
            raise StoreTampered(
                f"the run record {what}: another client of the store changed it "
                "(anyone who reaches the store's port can)"
            )

    def check_peers(self, key: bytes, ranks: set[int]) -> None:
        """Raise ``KeyMismatch`` for the first of ``ranks`` whose hello names another key."""
        mine = key_id(key)
        for rank in sorted(ranks - {self.rank}):
            said = self.peer(rank)
            if said is not None and said[1] != mine:
                raise KeyMismatch(fix(rank, said[0], self.rank, self.host, said[1] is not None))

    # rank 0 --------------------------------------------------------------------------
    def open_run(self, key: bytes, run: Run) -> bytes:
        """Publish the run record (rank 0); returns the raw value to watch. A record already
        there was not written by this rank 0 (a replay from an earlier run): it is
        replaced, and said."""
        name = self.attempt + "run"
        record = {"nonce": run.nonce, "started": run.started, "store": run.store}
        value = Sealer(key).seal(name, json.dumps(record))
        if self.raw.compare_set(name, "", value) != value.encode():
            self.raw.set(name, value)
            _say(self.rank, "the store held a run record rank 0 did not write (replaced)")
        self.hello(key)
        return value.encode()

    # the others ----------------------------------------------------------------------
    def join_run(
        self, find_key: Callable[[], bytes | None], timeout: float
    ) -> tuple[bytes, Run, bytes]:
        """Wait for the key and rank 0's run record: (key, run, the record's raw value).
        Raises ``KeyMismatch`` as soon as rank 0 holds another key, or said hello while
        this host still has none after ``KEY_GRACE``."""
        deadline = time.monotonic() + timeout
        first_seen: float | None = None
        while time.monotonic() < deadline:
            rank0 = self.peer(0)  # before the key: rank 0 makes its key before its hello
            key = find_key()
            if rank0 is not None and key is None:
                first_seen = first_seen or time.monotonic()
                if time.monotonic() - first_seen > KEY_GRACE:
                    self.hello(None)
                    raise KeyMismatch(fix(self.rank, self.host, 0, rank0[0], False))
            if rank0 is not None and key is not None and rank0[1] != key_id(key):
                self.hello(key)
                raise KeyMismatch(fix(self.rank, self.host, 0, rank0[0], True))
            joined = self._run(key) if key is not None else None
            if key is not None and joined is not None:
                self.hello(key)
                return key, joined[0], joined[1]
            time.sleep(POLL)
        raise RestartError(
            f"rank {self.rank}: initial rank 0 published no run record within {timeout:g}s"
        )

    def _run(self, key: bytes) -> tuple[Run, bytes] | None:
        raw = self._get("run")
        text = Sealer(key).open(self.attempt + "run", raw) if raw is not None else None
        if raw is None or text is None:
            return None
        try:
            record = json.loads(text)
            run = Run(str(record["nonce"]), float(record["started"]), str(record["store"]))
        except (TypeError, KeyError, ValueError):
            return None
        port = run.store.rpartition(":")[2]
        good = run.nonce.isalnum() and len(run.nonce) == 32 and port.isdigit()
        return (run, raw) if good else None


def _say(rank: int, text: str) -> None:
    print(f"nccl-doctor wrapper[{rank}]: {text}", file=sys.stderr, flush=True)
