"""``diag.*``: will the evidence a hang needs be readable when it happens?

Triage reads each rank's stacks with py-spy, which needs ptrace on processes
that are not its children: Yama ``ptrace_scope`` 1 allows only descendants
(ranks are children of torchrun, not of the shell running triage), 2 needs
CAP_SYS_PTRACE, 3 forbids it. ``checks.host`` tries it for real on an orphaned
process it starts. Flight Recorder is the other half: PyTorch dumps the last
collectives of every process group on a watchdog timeout, if it is on and
``TORCH_NCCL_TRACE_BUFFER_SIZE`` (the only name ProcessGroupNCCL reads for
dumps) is not 0 - for NCCL only: gloo has no watchdog and never dumps by
itself (``doctor.torchjob.backends``, which triage reads too).
"""

from __future__ import annotations

from doctor.checks import fixes
from doctor.checks.facts import Facts
from doctor.model import Finding, Severity
from doctor.torchjob.backends import GLOO_FLIGHT_RECORDER
from doctor.torchjob.torchenv import torch_bool, torch_int

MIN_FR_ENTRIES = 200
"""Fewer than this and the dump rarely reaches back to where ranks diverged."""
FR_DEFAULT = 2000


def check_ptrace(facts: Facts) -> list[Finding]:
    """``diag.ptrace``: triage needs to read other processes' stacks here."""
    p = facts.ptrace
    if p is None:
        return [Finding("diag.ptrace", Severity.SKIP, "ptrace", "ptrace was not probed.")]
    scope = "no Yama LSM" if p.scope is None else f"ptrace_scope={p.scope}"
    cap = "with" if p.cap_sys_ptrace else "without"
    if p.probe_error is not None:
        return [
            Finding(
                "diag.ptrace",
                Severity.SKIP,
                "ptrace",
                f"ptrace could not be tried here ({p.probe_error}; {scope}, {cap} CAP_SYS_PTRACE).",
            )
        ]
    if p.attach_error is not None:
        return [
            Finding(
                "diag.ptrace",
                Severity.WARN,
                "ptrace",
                f"attaching to a process that is not our child failed ({p.attach_error}; {scope}, "
                f"{cap} CAP_SYS_PTRACE): triage cannot read the ranks' stacks from here.",
                fixes.config_change(
                    "sudo sysctl -w kernel.yama.ptrace_scope=0, or run triage as "
                    "root / with CAP_SYS_PTRACE (docker: --cap-add SYS_PTRACE)"
                ),
            )
        ]
    if p.pyspy is None:
        return [
            Finding(
                "diag.ptrace",
                Severity.WARN,
                "py-spy",
                f"ptrace works ({scope}) but py-spy is not installed: triage cannot "
                "read Python stacks.",
                fixes.config_change("pip install py-spy"),
            )
        ]
    return [
        Finding(
            "diag.ptrace",
            Severity.PASS,
            "ptrace",
            f"stacks of other processes are readable ({scope}, {cap} CAP_SYS_PTRACE; "
            f"py-spy at {p.pyspy}).",
        )
    ]


def check_flight_recorder(facts: Facts) -> list[Finding]:
    """``diag.flight-recorder``: without a big enough buffer a hang leaves no trace."""
    env = facts.env
    trace = torch_int(env, "TORCH_NCCL_TRACE_BUFFER_SIZE")
    buffer = torch_int(env, "TORCH_FR_BUFFER_SIZE")
    entries = buffer if buffer is not None else trace if trace is not None else FR_DEFAULT
    subject = "TORCH_FR_BUFFER_SIZE" if buffer is not None else "TORCH_NCCL_TRACE_BUFFER_SIZE"
    problems: list[tuple[str, str]] = []
    if trace == 0 or entries == 0:
        problems.append(
            (
                "Flight Recorder is off (buffer size 0): no record of which collective "
                "each rank was in.",
                fixes.unset(facts, subject)
                + "\n"
                + fixes.export("TORCH_NCCL_TRACE_BUFFER_SIZE", str(FR_DEFAULT)),
            )
        )
    elif entries < MIN_FR_ENTRIES:
        problems.append(
            (
                f"Flight Recorder keeps only {entries} entries: too few to reach back "
                "to where ranks diverged.",
                fixes.export(subject, str(FR_DEFAULT)),
            )
        )
    if not torch_bool(env, "TORCH_NCCL_DUMP_ON_TIMEOUT", True):
        problems.append(
            (
                "TORCH_NCCL_DUMP_ON_TIMEOUT is off: nothing is dumped when the watchdog fires.",
                fixes.export("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"),
            )
        )
    if problems:
        return [
            Finding(
                "diag.flight-recorder",
                Severity.WARN,
                subject,
                " ".join(m for m, _ in problems),
                "\n".join(fix for _, fix in problems),
            )
        ]
    if facts.backend == "gloo":
        return [
            Finding(
                "diag.flight-recorder",
                Severity.INFO,
                subject,
                f"Flight Recorder on ({entries} entries), but this host runs gloo: "
                f"{GLOO_FLIGHT_RECORDER}.",
                "start each rank with `nccl-doctor launch -- CMD` (under torchrun: "
                "torchrun --no-python ... nccl-doctor launch -- python train.py)",
            )
        ]
    where = (
        env.get("TORCH_FR_DUMP_TEMP_FILE")
        or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
        or ("~/.cache/torch/comm_lib_trace_rank_")
    )
    return [
        Finding(
            "diag.flight-recorder",
            Severity.PASS,
            subject,
            f"Flight Recorder on ({entries} entries), dumped to {where}<rank> on a "
            "watchdog timeout.",
        )
    ]


def run(facts: Facts) -> list[Finding]:
    """The ``diag.*`` findings."""
    return [*check_ptrace(facts), *check_flight_recorder(facts)]
