"""The built-in health check run before a rank rejoins: the GPU, only where there is one.

NVIDIA's newest releases chain GPU, NVLink and NIC checks onto every restart
and fail on hosts without GPUs; here a CPU-only rank skips them. On a GPU rank
the device must still take and finish a small kernel, or the rank leaves the
job instead of hanging the next iteration.
"""

from __future__ import annotations

import os

from doctor.restart.hooks import HookState


def gpu_health_check(state: HookState) -> None:
    """Raise if this rank's CUDA device cannot run a kernel; nothing on a host without one."""
    import torch

    if not torch.cuda.is_available():
        return
    device = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
    with torch.cuda.device(device):
        probe = torch.ones(1024, device="cuda")
        if float((probe * 2).sum()) != 2048.0:
            raise RuntimeError(f"CUDA device {device} computed a wrong result")
        torch.cuda.synchronize()
