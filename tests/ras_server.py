"""A local stand-in for NCCL's RAS client port that replays a recorded report.

It speaks the protocol of NCCL's ``src/ras/client_support.cc``: one command per line,
case-insensitive; ``CLIENT PROTOCOL n`` -> ``SERVER PROTOCOL 2``; ``TIMEOUT n`` -> ``OK``;
``SET FORMAT text|json`` -> ``OK`` (``ERROR: Unknown command ...`` when playing an NCCL
older than 2.28.7); ``STATUS``/``VERBOSE STATUS`` -> the report, then the connection closes;
anything else -> ``ERROR: Unknown command ...``. Bound to 127.0.0.1 on a free port.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def ras_replay(
    text: str, json_text: str | None = None, *, answer: bool = True
) -> Iterator[tuple[int, list[str]]]:
    """(port, the commands received) while the replay serves; ``answer=False`` plays a
    process that accepts connections but never answers (a stopped NCCL process)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received: list[str] = []
    stop = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        fmt = "text"
        buffer = b""
        with conn:
            while not stop.is_set():
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    raw, _, buffer = buffer.partition(b"\n")
                    cmd = raw.decode().rstrip("\r")
                    received.append(cmd)
                    if not answer:
                        continue
                    low = cmd.lower()
                    if low.startswith("client protocol "):
                        conn.sendall(b"SERVER PROTOCOL 2\n")
                    elif low.startswith("timeout "):
                        conn.sendall(b"OK\n")
                    elif low.startswith("set format "):
                        wanted = low.split()[-1]
                        if wanted == "json" and json_text is None:
                            conn.sendall(f"ERROR: Unknown command {cmd}\n".encode())
                        else:
                            fmt = wanted
                            conn.sendall(b"OK\n")
                    elif low in ("status", "verbose status"):
                        body = json_text if fmt == "json" and json_text is not None else text
                        conn.sendall(body.encode())
                        return  # RAS closes the connection after the report
                    else:
                        conn.sendall(f"ERROR: Unknown command {cmd}\n".encode())

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield port, received
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
