"""The SLURM transport against stand-in ``scontrol`` and ``srun`` programs on PATH.

The real ones run in ``tests/multihost`` (a real SLURM cluster); these pin what needs
no cluster: parsing ``scontrol show job``, the step's options, and the reading of one
stream shared by many nodes within a deadline.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from doctor.remote.frames import encode
from doctor.remote.slurm import collect_via_srun, job_nodes, srun_argv

SCONTROL = (
    "#!/bin/sh\necho 'JobId=4242 JobName=train UserId=root(0) JobState=RUNNING Reason=None "
    "NodeList=gpu[001-003] NumNodes=3 NumCPUs=6'\n"
)


def program(tmp: Path, name: str, text: str) -> dict[str, str]:
    path = tmp / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{tmp}:{os.environ['PATH']}"}


def test_scontrol_names_the_jobs_nodes(tmp_path) -> None:
    # GIVEN an scontrol that knows job 4242 on gpu[001-003]
    env = program(tmp_path, "scontrol", SCONTROL)
    # WHEN asked THEN its nodes, expanded; and no question at all for a non-SLURM id
    found = job_nodes("4242", env)
    assert found is not None and found.nodes == ("gpu001", "gpu002", "gpu003")
    assert found.state == "RUNNING"
    assert job_nodes("torchrun-abc", env) is None


def test_the_step_overlaps_the_hung_one_one_task_per_node() -> None:
    argv = srun_argv("4242", ["gpu001", "gpu002"], ["collect"])
    assert argv[:3] == ["srun", "--overlap", "--jobid=4242"]
    assert "--ntasks-per-node=1" in argv and "--nodelist=gpu[001-002]" in argv
    assert "--unbuffered" not in argv  # raw chunks would interleave nodes mid-line
    assert argv[-1] == "collect"


def test_one_stream_many_nodes_and_a_silent_one_within_the_deadline(tmp_path) -> None:
    # GIVEN an srun whose stream interleaves two nodes' documents, and a third node that
    # never answers (srun keeps running)
    a = list(encode("gpu001", '{"a":' + '"x"' * 900 + "}"))
    b = list(encode("gpu002", '{"b": 2}'))
    lines = [f"0: {a[0]}", f"1: {b[0]}", *(f"0: {line}" for line in a[1:])]  # srun --label
    script = "#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in lines)
    script += "echo 'srun: error: gpu003: task 2: Exited with exit code 127' >&2\nexec sleep 30\n"
    env = program(tmp_path, "srun", script)
    # WHEN collected with a 2 s deadline
    start = time.monotonic()
    answers = collect_via_srun("4242", ["gpu001", "gpu002", "gpu003"], ["collect"], 2.0, env)
    # THEN it returns by the deadline, both documents whole, and the third node's reason
    assert time.monotonic() - start < 2.6
    assert answers["gpu001"].text == '{"a":' + '"x"' * 900 + "}"
    assert answers["gpu002"].text == '{"b": 2}'
    assert answers["gpu003"].text is None
    assert "not installed" in answers["gpu003"].reason


def test_the_caller_ends_the_wait_early_and_what_srun_sent_is_still_read(tmp_path) -> None:
    # GIVEN an srun that sends two nodes' documents and then waits forever for the third
    a, b = list(encode("gpu001", '{"a": 1}')), list(encode("gpu002", '{"b": 2}'))
    script = "#!/bin/sh\n" + "".join(f"echo '0: {line}'\n" for line in a)
    script += "".join(f"echo '1: {line}'\n" for line in b) + "exec sleep 30\n"
    env = program(tmp_path, "srun", script)
    answered: list[str] = []
    # WHEN the caller says nothing more can come once both have answered
    start = time.monotonic()
    answers = collect_via_srun(
        "4242",
        ["gpu001", "gpu002", "gpu003"],
        ["collect"],
        20.0,
        env,
        answered.append,
        lambda: len(answered) == 2,
    )
    # THEN the wait ends then, not at the 20 s deadline; both documents are whole
    assert time.monotonic() - start < 10
    assert (answers["gpu001"].text, answers["gpu002"].text) == ('{"a": 1}', '{"b": 2}')
    assert answers["gpu003"].reason.startswith("no answer when the round ended, after ")


def test_a_step_aborted_by_one_nodes_failed_launch_runs_again_without_it(tmp_path) -> None:
    # GIVEN an srun that, with gpu003 in the step, fails its launch there and kills the
    # others' tasks (as SLURM does when a node is cut off), and answers without it
    a, b = list(encode("gpu001", '{"a": 1}')), list(encode("gpu002", '{"b": 2}'))
    answer = "".join(f"echo '0: {line}'\n" for line in a)
    answer += "".join(f"echo '1: {line}'\n" for line in b)
    script = (
        '#!/bin/sh\ncase "$*" in *--nodelist=gpu[[]001-003[]]*)\n'
        "  echo 'srun: error: Task launch for StepId=4242.7 failed on node gpu003: "
        "Communication connection failure' >&2\n"
        "  echo 'srun: error: gpu001: task 0: Killed' >&2\n  exit 1 ;;\nesac\n" + answer
    )
    env = program(tmp_path, "srun", script)
    # WHEN collected
    answers = collect_via_srun("4242", ["gpu001", "gpu002", "gpu003"], ["collect"], 10.0, env)
    # THEN the step ran again on gpu001 and gpu002, whose documents are there
    assert (answers["gpu001"].text, answers["gpu002"].text) == ('{"a": 1}', '{"b": 2}')
    assert answers["gpu001"].seconds is not None
    # AND gpu003 says why it is missing
    assert "Task launch for StepId=4242.7 failed on node gpu003" in answers["gpu003"].reason
