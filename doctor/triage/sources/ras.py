"""NCCL RAS, asked live: the job's own view of which ranks are dead, missing or behind.

Every NCCL process (2.24 and later, unless ``NCCL_RAS_ENABLE=0``) runs a RAS thread; one
per host listens for clients on ``localhost:28028`` (``NCCL_RAS_ADDR=host:port`` moves it)
and answers for the whole job, gathering every process's data over the RAS network.

The client protocol, as NCCL's ``src/ras/client.cc`` and ``client_support.cc`` speak it
(protocol 2 since 2.24.3): text lines, commands case-insensitive, answers ending in
``\\n``::

    client: CLIENT PROTOCOL 2        server: SERVER PROTOCOL 2
    client: TIMEOUT <seconds>        server: OK          (how long RAS waits for peers)
    client: SET FORMAT json          server: OK          (2.28.7+; older: ERROR: Unknown ...)
    client: [VERBOSE ]STATUS         server: the report, then it closes the connection

The report is what ``ncclras`` prints; ``doctor.logs.ras`` reads it. A query costs the
job almost nothing (RAS gathers its data off the NCCL critical path), but some NCCL
versions crash when queried at the wrong moment (``checks/data/ras_crashes.toml``):
preflight warns about those, and this source can be turned off (``NCCL_DOCTOR_RAS=0``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from doctor.evidence import LogEvent
from doctor.logs import kinds, parse_lines
from doctor.model import Skipped
from doctor.triage.sources.interface import Collected, Source
from doctor.triage.target import Target

DEFAULT_ADDR = ("localhost", 28028)
PROTOCOL = 2
MAX_REPORT_BYTES = 16 << 20
"""A verbose report of a very large job; anything longer is cut (and read as far as it got)."""
RAS_TIMEOUT_S = 5
"""How long RAS itself waits for unresponsive peers (ncclras's default)."""
SWITCH = "NCCL_DOCTOR_RAS"


class RasError(Exception):
    """RAS did not answer as its protocol says (no listener, a refusal, a timeout)."""


def ras_address(env: Mapping[str, str]) -> tuple[str, int]:
    """Where RAS listens for clients: ``NCCL_RAS_ADDR`` (``host:port``, ``[v6]:port``), else
    localhost:28028."""
    value = env.get("NCCL_RAS_ADDR", "").strip()
    if not value:
        return DEFAULT_ADDR
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or DEFAULT_ADDR[0]
    return (host, int(port)) if port.isdigit() else (value.strip("[]"), DEFAULT_ADDR[1])


class _Conversation:
    """One connection: a line asked, a line answered, then the report to the end."""

    def __init__(self, address: tuple[str, int], deadline: float) -> None:
        self.deadline = deadline
        self.sock = socket.create_connection(address, timeout=self._left())
        self.buffer = b""

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RasError("no answer before the deadline")
        return left

    def ask(self, command: str) -> str:
        self.sock.settimeout(self._left())
        self.sock.sendall(command.encode() + b"\n")
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RasError(f"the connection closed after {command!r}")
            self.buffer += chunk
            if len(self.buffer) > 65536:
                raise RasError(f"no line in the answer to {command!r}")
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace").strip()

    def report(self, command: str) -> tuple[str, bool]:
        """The answer to ``command`` read to the connection's end; True if it was cut."""
        self.sock.settimeout(self._left())
        self.sock.sendall(command.encode() + b"\n")
        parts, size = [self.buffer], len(self.buffer)
        while size <= MAX_REPORT_BYTES:
            self.sock.settimeout(self._left())
            chunk = self.sock.recv(65536)
            if not chunk:
                return b"".join(parts).decode(errors="replace"), False
            parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)[:MAX_REPORT_BYTES].decode(errors="replace"), True

    def close(self) -> None:
        self.sock.close()


def query_ras(
    address: tuple[str, int] = DEFAULT_ADDR,
    *,
    deadline: float,
    json: bool = False,
    verbose: bool = False,
    ras_timeout: int = RAS_TIMEOUT_S,
) -> tuple[str, bool]:
    """RAS's status report (text, or JSON where the NCCL version has it); True if cut.

    Raises ``RasError`` when nothing answers or the answer is not RAS's."""
    try:
        talk = _Conversation(address, deadline)
    except OSError as exc:
        raise RasError(f"no RAS listener at {address[0]}:{address[1]} ({exc})") from None
    try:
        hello = talk.ask(f"CLIENT PROTOCOL {PROTOCOL}")
        if not hello.upper().startswith("SERVER PROTOCOL "):
            raise RasError(f"not NCCL RAS at {address[0]}:{address[1]}: {hello[:80]!r}")
        if talk.ask(f"TIMEOUT {ras_timeout}").upper() != "OK":
            raise RasError("RAS refused the timeout")
        if json and talk.ask("SET FORMAT json").upper() != "OK":
            json = False  # NCCL before 2.28.7: the text report says the same
        return talk.report(("VERBOSE " if verbose else "") + "STATUS")
    except OSError as exc:
        raise RasError(f"RAS at {address[0]}:{address[1]}: {exc}") from None
    finally:
        talk.close()


def listener_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Socket inodes listening on ``port`` (``/proc/net/tcp`` and ``tcp6``, state 0A)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[1].endswith(f":{port:04X}"):
                inodes.add(fields[9])
    return inodes


def owned_by(inodes: set[str], pids: Iterable[int], proc: Path = Path("/proc")) -> bool:
    """Whether one of ``pids`` holds one of the sockets ``inodes``: the RAS that answers is
    this job's, not another job's on the same node."""
    wanted = {f"socket:[{i}]" for i in inodes}
    for pid in pids:
        try:
            fds = os.listdir(proc / str(pid) / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(proc / str(pid) / "fd" / fd) in wanted:
                    return True
            except OSError:
                continue
    return False


class RasSource(Source):
    """Asks the RAS of this host; its report becomes log events.

    Only a listener held by one of the job's own ranks is asked (another job's RAS on the
    same node would describe that job). When the first report singles out ranks by their
    operation counts, RAS is asked again at the end of the window: counts that did not
    move are a stuck communicator, counts that moved a job in flight (NCCL's RAS guide)."""

    name = "ras"

    def __init__(self, env: Mapping[str, str], window: float = 1.0) -> None:
        self.env = env
        self.window = window

    def collect(self, target: Target, deadline: float) -> Collected:
        rank_env = target.ranks[0].env if target.ranks else {}
        if self.env.get(SWITCH) == "0" or rank_env.get("NCCL_RAS_ENABLE") == "0":
            return Collected()
        address = ras_address(rank_env)
        inodes = listener_inodes(address[1])
        if not inodes:
            return Collected()  # no RAS here: NCCL older than 2.24, gloo, or RAS elsewhere
        if address[0] in ("localhost", "127.0.0.1", "::1") and not owned_by(
            inodes, (r.pid for r in target.ranks)
        ):
            why = f"the RAS listener on port {address[1]} is not one of this job's ranks: not read"
            return Collected(skipped=(Skipped(None, self.name, why),))
        second_at = time.monotonic() + self.window
        events, skipped = self._ask(address, deadline, 1)
        if any(e.kind == kinds.RAS_COUNT for e in events) and second_at < deadline - 1:
            time.sleep(max(0.0, second_at - time.monotonic()))
            more, more_skipped = self._ask(address, deadline, 2)
            events, skipped = events + more, skipped + more_skipped
        return Collected(logs=tuple(events), skipped=tuple(skipped))

    def _ask(
        self, address: tuple[str, int], deadline: float, nth: int
    ) -> tuple[list[LogEvent], list[Skipped]]:
        try:
            text, cut = query_ras(address, deadline=deadline)
        except RasError as exc:
            return [], [Skipped(None, self.name, str(exc))]
        origin = f"ras@{address[0]}:{address[1]}#{nth}"
        events = parse_lines(text.splitlines(), origin=origin)
        why = f"the RAS report was cut at {MAX_REPORT_BYTES} bytes"
        return events, [Skipped(None, self.name, why)] if cut else []
