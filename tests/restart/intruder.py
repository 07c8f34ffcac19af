"""Another user's client of a job's restart store: it reaches the port but holds no key.

``python intruder.py HOST PORT`` reads one JSON command per line on stdin and answers
each with one JSON line: ``{"get": KEY}`` (the value, hex, or null), ``{"append": KEY,
"hex": VALUE}``, ``{"delete": KEY, "seconds": S}`` (deletes the key every 20 ms for S
seconds; the answer counts the deletes that found it, and ``error`` says why it stopped
early, if it did).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    store = dist.TCPStore(
        sys.argv[1], int(sys.argv[2]), None, False, timedelta(seconds=60), wait_for_workers=False
    )
    print(json.dumps({"ready": True}), flush=True)
    error = ""
    for line in sys.stdin:
        order = json.loads(line)
        if "get" in order:
            key = order["get"]
            answer = store.get(key).hex() if store.check([key]) else None
        elif "append" in order:
            store.append(order["append"], bytes.fromhex(order["hex"]))
            answer = True
        else:
            end, answer = time.monotonic() + order["seconds"], 0
            while time.monotonic() < end:
                try:
                    answer += bool(store.delete_key(order["delete"]))
                except dist.DistError as exc:  # the job ended: its store is gone
                    error = f"{type(exc).__name__}: {str(exc)[:300]}"
                    break
                time.sleep(0.02)
        print(json.dumps({"answer": answer, "error": error}), flush=True)
        error = ""


if __name__ == "__main__":
    main()
