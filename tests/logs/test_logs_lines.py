"""Prefixes of combined logs: whose line it is (recorded prefixes of real launchers)."""

from __future__ import annotations

import pytest

from doctor.logs import parse_lines
from doctor.logs.lines import split


@pytest.mark.parametrize(
    ("raw", "rank", "local", "host", "pid", "nccl"),
    [
        # srun --label: the task id is the rank
        ("12: [E ProcessGroupNCCL.cpp:475] oops", 12, None, "", None, ""),
        # PyTorch's C++ logger prefix, then its own [Rank N]
        (
            "[rank3]:[E1121 10:02:11 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog",
            3,
            None,
            "",
            None,
            "",
        ),
        # torchrun --tee: role and local rank, with a replica id in torchx
        ("[default5]:loss 0.3", None, 5, "", None, ""),
        ("[trainer0|0]:ncclInternalError: Internal check failed.", None, 0, "", None, ""),
        # NCCL's own prefix, behind an srun label
        (
            "3: gpu-7:48211:48297 [0] misc/socket.cc:538 NCCL WARN connect",
            3,
            None,
            "gpu-7",
            48211,
            "WARN",
        ),
        # masked pid (pasted in an issue), and NCCL's diagnostics without a device
        (
            "host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call",
            None,
            None,
            "host-01.example.com",
            None,
            "WARN",
        ),
        ("node0:24563 NCCL DIAG [INFO] net bw", None, None, "node0", 24563, "DIAG"),
        # Ray's forwarded worker output
        ("(RayTrainWorker pid=2231, ip=10.0.0.5) hello", None, None, "10.0.0.5", 2231, ""),
        # a timestamp is not an srun label
        ("12:30:01 step 5", None, None, "", None, ""),
        # PyTorch's rank prefix as users paste it, the colon dropped
        ("[rank6] Watchdog caught collective operation timeout:", 6, None, "", None, ""),
        # ... and indented under a heading of the user's own ("Ranks 4-7:")
        ("  [rank5]: WorkNCCL(SeqNum=2426, OpType=ALLGATHER)", 5, None, "", None, ""),
        # Open MPI's --tag-output (job, rank), after --timestamp-output's date; horovodrun's
        (
            "Wed Jun 22 15:48:08 2016[1,43]<stdout>:UCX  ERROR Send completion",
            43,
            None,
            "",
            None,
            "",
        ),
        ("[2]<stderr>:Missing ranks:", 2, None, "", None, ""),
        (
            "[1,mpirank:3,algo-2]<stderr>:Traceback (most recent call last):",
            3,
            None,
            "algo-2",
            None,
            "",
        ),
        # Lightning's rank prefix; vLLM's worker processes; SGLang's tensor-parallel rank in
        # its timestamp (not with a data-parallel rank beside it: the layout decides)
        ("[rank: 1] Traceback (most recent call last):", 1, None, "", None, ""),
        ("(VllmWorker rank=2 pid=2236) INFO 05-01 12:00:00 [gpu.py:9] x", 2, None, "", 2236, ""),
        ("[2025-02-23 06:04:22 TP7] Scheduler hit an exception:", 7, None, "", None, ""),
        ("[2025-02-23 06:04:22 DP1 TP3] Scheduler hit an exception:", None, None, "", None, ""),
        # srun starting one torchrun per node: the task is the node's, the rank the text's
        ("1: [default3]:[E1129 ProcessGroupNCCL.cpp:616] [Rank 11] Watchdog", 11, 3, "", None, ""),
        ("1: [default3]:Traceback (most recent call last):", None, 3, "", None, ""),
        ("1: [default3]:[rank11]: Traceback (most recent call last):", 11, 3, "", None, ""),
    ],
)
def test_prefixes_say_whose_line_it_is(raw, rank, local, host, pid, nccl) -> None:
    # GIVEN a line as a launcher or NCCL wrote it WHEN its prefixes are peeled off
    line = split(raw, "x.log:1")
    # THEN the rank, local rank, host, pid and NCCL level are the prefix's
    assert (line.rank, line.local_rank, line.host, line.pid, line.nccl) == (
        rank,
        local,
        host,
        pid,
        nccl,
    )


def test_a_file_rank_is_the_default_and_a_line_label_wins() -> None:
    assert split("plain text", "rank_4.log:1", file_rank=4).rank == 4
    assert split("7: labelled", "rank_4.log:1", file_rank=4).rank == 7


SMI_BANNER = "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |"


@pytest.mark.parametrize(
    "line",
    [
        "# nThread 1 nGpus 4 minBytes 8 " + "1" * 16_000,  # (\w+) is not supported
        "h:1:2 [0] NCCL WARN Connection refused by " + "a" * 16_000,  # an addr before <port>
        "| 0 " + " " * 16_000 + "x|",  # an nvidia-smi row with no bus id
        "NCCL WARN " + "\x1b]" + "a" * 511 + ("\x1b[" + "0;" * 15) * 500,  # escapes, unended
        "2024-05-01T12:00:00Z stderr F " * 500 + "NCCL WARN x",  # prefixes, nested
        "ERROR:torch.x:[a.py:1:f] " * 500 + "NCCL WARN x",  # logging formats' prefixes
    ],
    ids=["unsupported", "address", "smi-row", "escapes", "prefixes", "loggers"],
)
def test_a_long_line_costs_linear_time(line: str) -> None:
    import time

    from doctor.logs.parse import parse_text

    # GIVEN lines as long as the reader keeps (16 KiB) that once sent a pattern into
    # quadratic backtracking (3 s a line: an hour for a log of them)
    start = time.monotonic()
    # WHEN twenty of them are parsed
    parse_text([SMI_BANNER, *[line] * 20], "long.log")
    # THEN at the pace of any other line (measured 30 ms; the bound only catches the quadratic)
    assert time.monotonic() - start < 5


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/vllm/v1/worker/gpu_worker.py", line 88, in init_device',
    "    torch.cuda.set_device(self.device)",
    "RuntimeError: CUDA error: invalid device ordinal",
]


def test_a_traceback_vllm_logs_with_its_prefix_on_every_line_is_read() -> None:
    # GIVEN a vLLM worker's exception as its logger prints it: its process, level, time and
    # place before every line of the traceback
    prefix = "(VllmWorker rank=1 pid=77) ERROR 05-01 12:00:00 [multiproc_executor.py:470] "
    # WHEN it is parsed THEN it is rank 1's exception, its text the exception's own
    events = parse_lines([prefix + line for line in TRACEBACK])
    raised = [(e.rank, e.text[:40]) for e in events if e.kind == "exception"]
    assert raised == [(1, "RuntimeError: CUDA error: invalid device")]


@pytest.mark.parametrize(
    "prefix",
    [
        "05/01/2024 12:00:00 - ERROR - transformers.trainer - ",
        "ERROR:torch.distributed.elastic.multiprocessing.api:",
        "[2024-05-01 12:00:00,123] [ERROR] [engine.py:96:step] ",
        "2024-05-01 12:34:56.789012: E tensorflow/core/kernels/collective_ops.cc:88] ",
        "E0501 12:34:56.789012   12345 trainer.cc:88] ",
        "(pid=2345, ip=10.0.0.2) ",
        "(pid=2345) ",
        "[2024-05-01 12:00:00,123] torch.distributed.elastic.multiprocessing.api: [ERROR] ",
        "2024-05-01 12:00:00 | ERROR | fairseq.trainer | ",
        "[2024-05-01 12:00:00,123][__main__][ERROR] - ",
        "[NeMo E 2024-05-01 12:34:56 exp_manager:349] ",
    ],
    ids=[
        "transformers",
        "basicConfig",
        "deepspeed",
        "tensorflow",
        "glog",
        "ray",
        "ray-task",
        "torchelastic",
        "fairseq",
        "hydra",
        "nemo",
    ],
)
def test_a_traceback_a_logger_prints_with_its_prefix_on_every_line_is_read(prefix) -> None:
    # GIVEN a traceback as a logging format or a launcher relays it, every line prefixed
    # WHEN it is parsed THEN its exception is read, its text the exception's own
    events = parse_lines([prefix + line for line in TRACEBACK])
    raised = [e.text[:40] for e in events if e.kind == "exception"]
    assert raised == ["RuntimeError: CUDA error: invalid device"]


def test_the_logger_a_logging_format_names_gives_the_line_its_words() -> None:
    from doctor.logs.parse import parse_text

    # GIVEN torchelastic's warning as Python's default logging format prints it
    line = (
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'n1_7_0' has "
        "failed to send a keep-alive heartbeat to the rendezvous 'none'"
    )
    # WHEN it is split and parsed THEN the text is the message, and the logger's name is
    # among the words the word model reads (it tells which part of torch spoke), not the level
    assert split(line, "x.log:1").text.startswith("The node")
    words = parse_text([line], "x.log").words
    assert "dynamic_rendezvous" in words and "warning" not in words


def test_an_exception_s_own_words_are_no_logger() -> None:
    # GIVEN an exception whose message starts with a level in brackets WHEN it is split
    # THEN its type stays in the text (a logger's name has dots: torch.distributed.run)
    line = split("RuntimeError: [ERROR] the store went away", "x.log:1")
    assert (line.text, line.logger) == ("RuntimeError: [ERROR] the store went away", "")
