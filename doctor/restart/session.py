"""Where the wrapper's TCPStore is, and who hosts it.

Under torchrun (``TORCHELASTIC_USE_AGENT_STORE=True``) the elastic agent
already hosts a TCPStore at ``MASTER_ADDR:MASTER_PORT`` that outlives every
rank: every rank is a client. Otherwise initial rank 0's *monitor process*
hosts it, so a SIGKILLed rank 0 does not take the rendezvous with it. Keys are
prefixed with the torchrun restart count, so a whole-group restart starts clean.

A store we host listens on the job's address only (``MASTER_ADDR``, resolved),
never on every interface: TCPStore binds ``*`` unless handed a socket, so we
bind one and pass its descriptor. Its values are sealed with the job's key
(``auth``).
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from doctor.registry import job_dir
from doctor.restart.auth import Sealer
from doctor.restart.exceptions import RestartError, StoreAbandoned
from doctor.restart.options import RestartOptions
from doctor.restart.store import RestartStore
from doctor.safeio import private_dir

PROBE_INTERVAL = 0.02


@dataclass(frozen=True)
class Session:
    host: str
    port: int
    prefix: str
    hosting: bool
    """True in initial rank 0 when no launcher store exists: its monitor process serves."""
    key: bytes = field(default=b"", repr=False)
    """The job's store key (``auth.job_key``)."""

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
        chosen_port = port or int(
            env.get("NCCL_DOCTOR_STORE_PORT") or env.get("MASTER_PORT") or 29500
        )
        return cls(
            host or env.get("MASTER_ADDR", "127.0.0.1"),
            chosen_port,
            f"doctor/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/",
            hosting=not agent_store and initial_rank == 0,
            key=key,
        )


def connect_store(
    session: Session,
    initial_world_size: int,
    options: RestartOptions,
    host: bool,
    abandon: Callable[[], bool] = lambda: False,
) -> RestartStore:
    """A TCPStore server (``host``) or client, wrapped with the wrapper's keys. A client first
    waits for the server to listen (see ``await_listener``); ``abandon`` ends that wait."""
    import torch.distributed as dist

    listener = listen_on(session.host, session.port) if host else None
    if not host:
        await_listener(session.host, session.port, options.barrier_timeout, abandon)
    try:
        base = dist.TCPStore(
            session.host,
            session.port,
            None,
            host,
            timedelta(seconds=options.barrier_timeout),
            wait_for_workers=False,
            master_listen_fd=listener.fileno() if listener is not None else None,
        )
    except BaseException:
        if listener is not None:
            listener.close()
        raise
    if listener is not None:
        listener.detach()  # the store's server owns the descriptor now
    return RestartStore(base, session.prefix, initial_world_size, Sealer(session.key), host)


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


def job_directory(job: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """The registry directory of the job (launch's, or the launcher's id); else a private
    temporary one, which the wrapper removes when it ends (True: it is temporary)."""
    if env.get("NCCL_DOCTOR_JOB_DIR") or job:
        return private_dir(job_dir(job or "", env)), False
    return Path(tempfile.mkdtemp(prefix="nccl-doctor-wrapper-")), True
