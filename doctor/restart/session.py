"""Where the wrapper's TCPStore is, and who hosts it.

Initial rank 0's *monitor process* hosts the wrapper's store, so a SIGKILLed
rank 0 does not take the rendezvous with it: at ``MASTER_ADDR:MASTER_PORT``
under a plain launcher. Under torchrun (``TORCHELASTIC_USE_AGENT_STORE=True``)
that port is the elastic agent's store, which torch binds on every interface:
the wrapper only meets there (the hello and run records, ``handshake``) and
hosts its own store on a free port of the loopback address when the job is on
one host (``LOCAL_WORLD_SIZE == WORLD_SIZE``), else of ``MASTER_ADDR``; the
run record tells the other ranks where. Keys are prefixed with the torchrun
restart count, so a whole-group restart starts clean, then with the run's
nonce, so no value outlives its run.

A store we host listens on that one address, never on every interface:
TCPStore binds ``*`` unless handed a socket, so we bind one and pass its
descriptor. Its values are sealed with the job's key (``auth``).

The key's directory is the job's (``NCCL_DOCTOR_JOB_DIR``, or the registry
directory of the job id), else, under a launcher that gives no job id
(``mpirun``, a hand-written one), a private registry directory named from the
job's rendezvous identity, ``MASTER_ADDR``, ``MASTER_PORT`` and the world size:
every rank of the job on a host finds the same one with no setup.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from doctor.jobdir.registry import job_dir
from doctor.restart.auth import Sealer, job_key, peer_key
from doctor.restart.exceptions import RestartError, StoreAbandoned
from doctor.restart.handshake import CLOCK_SKEW, Handshake, Run
from doctor.restart.options import RestartOptions
from doctor.restart.store import RestartStore
from doctor.trust.safeio import private_dir

PROBE_INTERVAL = 0.02


@dataclass(frozen=True)
class Session:
    host: str
    port: int
    prefix: str
    """Where the run's keys live: ``doctor/<attempt>/<nonce>/`` once the run is known."""
    hosting: bool
    """True in initial rank 0 when no launcher store exists: its monitor process serves."""
    key: bytes = field(default=b"", repr=False)
    """The job's store key (``auth.job_key``)."""
    attempt: str = ""
    """``doctor/<attempt>/``: where the hello and run records are (``handshake``)."""
    started: float | None = None
    """When rank 0 drew the run's nonce: fault records much older are refused."""
    rendezvous: tuple[str, int] | None = None
    """torchrun's agent store, where the ranks meet before they know the wrapper's store."""
    listener: int | None = None
    """Rank 0's bound socket for the store its monitor process hosts (under torchrun)."""

    def with_run(self, key: bytes, run: Run) -> Session:
        return replace(self, key=key, prefix=run.prefix(self.attempt), started=run.started)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        host: str | None,
        port: int | None,
        initial_rank: int,
        key: bytes,
    ) -> Session:
        agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        address = env.get("MASTER_ADDR", "127.0.0.1")
        master_port = int(env.get("MASTER_PORT") or 29500)
        given_port = port or int(env.get("NCCL_DOCTOR_STORE_PORT") or 0)
        attempt = f"doctor/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
        if not agent_store:
            return cls(
                host or address,
                given_port or master_port,
                attempt,
                hosting=initial_rank == 0,
                key=key,
                attempt=attempt,
            )
        one_host = env.get("LOCAL_WORLD_SIZE") == env.get("WORLD_SIZE", "1")
        return cls(
            host or ("127.0.0.1" if one_host else address),
            given_port,
            attempt,
            hosting=initial_rank == 0,
            key=key,
            attempt=attempt,
            rendezvous=(address, master_port),
        )

    @property
    def meeting(self) -> tuple[str, int]:
        """Where the hello and run records are: the agent's store, else ours."""
        return self.rendezvous or (self.host, self.port)


def join(
    session: Session, directory: Path, env: Mapping[str, str], rank: int, options: RestartOptions
) -> tuple[Session, Run, bytes | None]:
    """The session of this run, and rank 0's run record as read (None in rank 0). Rank 0
    holds the key and draws the run (published once its store is up: ``open_run``); the
    others wait on a client of their own for the key and rank 0's run record, and fail at
    once when their key cannot be rank 0's."""
    if rank == 0:
        if session.rendezvous is not None:  # our own store, on a port the run record names
            sock = listen_on(session.host, session.port)
            session = replace(session, port=sock.getsockname()[1], listener=sock.detach())
        run = Run(store=f"{session.host}:{session.port}")
        return session.with_run(job_key(directory, env), run), run, None
    raw = meeting_client(session, options)
    try:
        hello = Handshake(raw, session.attempt, rank)
        key, run, record = hello.join_run(lambda: peer_key(directory, env), options.barrier_timeout)
    finally:
        del raw  # closed before the monitor process forks
    session = session.with_run(key, run)
    if session.rendezvous is not None:
        host, _, port = run.store.rpartition(":")
        session = replace(session, host=host, port=int(port))
    return session, run, record


def meeting_client(session: Session, options: RestartOptions) -> Any:
    """A raw client of the store where the ranks meet (``Session.meeting``)."""
    host, port = session.meeting
    await_listener(host, port, options.barrier_timeout, lambda: False)
    return _tcp_store(replace(session, host=host, port=port), options, None)


def connect_store(
    session: Session,
    initial_world_size: int,
    options: RestartOptions,
    host: bool,
    abandon: Callable[[], bool] = lambda: False,
) -> RestartStore:
    """A TCPStore server (``host``) or client, wrapped with the wrapper's keys. A client first
    waits for the server to listen (see ``await_listener``); ``abandon`` ends that wait."""
    listener = None
    if host:
        given = session.listener
        listener = socket.socket(fileno=given) if given is not None else None
        listener = listener or listen_on(session.host, session.port)
    if not host:
        await_listener(session.host, session.port, options.barrier_timeout, abandon)
    try:
        base = _tcp_store(session, options, listener)
    except BaseException:
        if listener is not None:
            listener.close()
        raise
    if listener is not None:
        listener.detach()  # the store's server owns the descriptor now
    since = session.started - CLOCK_SKEW if session.started is not None else None
    return RestartStore(base, session.prefix, initial_world_size, Sealer(session.key), host, since)


def _tcp_store(session: Session, options: RestartOptions, listener: socket.socket | None) -> Any:
    """The server on ``listener`` (a bound socket), or a client without one."""
    import torch.distributed as dist

    return dist.TCPStore(
        session.host,
        session.port,
        None,
        listener is not None,
        timedelta(seconds=options.barrier_timeout),
        wait_for_workers=False,
        master_listen_fd=listener.fileno() if listener is not None else None,
    )


def listen_on(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``'s address only (the job's interface)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise RestartError(f"cannot resolve the store address {host}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(512)
    except OSError as exc:
        sock.close()
        raise RestartError(
            f"cannot listen on {host}:{port} for the store: {exc.strerror}"
        ) from None
    return sock


def await_listener(host: str, port: int, timeout: float, abandon: Callable[[], bool]) -> None:
    """Probe the store's port every 20 ms until it accepts a connection. TCPStore retries a
    refused connect after 1 s, 1.5 s, 2.25 s... with jitter: measured on torch 2.13, a client
    that started 4 s before its server got in 2 s after it, so a monitor process started
    before rank 0's could miss a whole short job, and outlive it."""
    deadline = time.monotonic() + timeout
    while not abandon():
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise RestartError(
                    f"no store listened at {host}:{port} within {timeout:g}s "
                    "(initial rank 0's monitor process or torchrun's agent "
                    "hosts it)"
                ) from None
            time.sleep(PROBE_INTERVAL)
    raise StoreAbandoned(f"stopped waiting for the store at {host}:{port}")


def rendezvous_job(env: Mapping[str, str]) -> str:
    """A job id from the rendezvous identity, for launchers that give none: the same on
    every rank of the job, different for any job that runs at the same time."""
    where = env.get("MASTER_ADDR", "127.0.0.1")
    port, world = env.get("MASTER_PORT", "29500"), env.get("WORLD_SIZE", "1")
    return re.sub(r"[^A-Za-z0-9._:-]", "_", f"rdzv-{where}-{port}-{world}")[:200]


def job_directory(job: str, env: Mapping[str, str]) -> Path:
    """The job's private registry directory (``NCCL_DOCTOR_JOB_DIR`` wins)."""
    return private_dir(job_dir(job, env))
