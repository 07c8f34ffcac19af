"""What the training script says of itself: progress bars read against the watchdog, and
a straggler detector's reports (recorded text and its variations)."""

from __future__ import annotations

from verdict.test_log_rules import PROGRESS, WATCHDOG, judge

from doctor.logs import kinds, parse_lines
from doctor.logs.training import REPORT_CHARS
from doctor.model import HangClass

BAR = "  Class  Images  Labels  mAP@.5:  {pct}% {n}/32 [01:{s:02d}<00:25,  2.80s/it]"


def bar(n: int) -> str:
    return BAR.format(pct=100 * n // 32, n=n, s=n)


def laggard_waits(bars_after: list[str]) -> list[str]:
    """Ranks 0-2 wait in collective 42, rank 3 issued (and finished) only 41; the bar at 24
    before."""
    lines = [bar(23), bar(24)]
    lines += [WATCHDOG.format(r=r, seq=42, op="BROADCAST") for r in range(3)]
    lines += [PROGRESS.format(r=r, seq=42, enq=42, done=41) for r in range(3)]
    lines += [PROGRESS.format(r=3, seq=41, enq=41, done=41)]
    return lines + bars_after


def test_a_bar_counting_on_after_the_timeout_is_a_laggard_at_work() -> None:
    # GIVEN a laggard, and the job's progress bar moving on after the others timed out
    verdict = judge(laggard_waits([bar(25), bar(26)]))
    # THEN the laggard was busy in its own code: cpu_stuck, low, the bar quoted
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.CPU_STUCK, (3,))
    assert "from 24/32 to 25/32" in verdict.summary


def test_a_bar_that_stood_still_or_stopped_before_the_timeout_says_nothing() -> None:
    # GIVEN the same laggard, with the bar repeating its count, or never drawn again
    for after in ([bar(24)], []):
        verdict = judge(laggard_waits(after))
        # THEN why the laggard is behind stays for its stack to say
        assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.UNKNOWN, (3,))


def test_a_bar_and_its_timeout_on_one_line_count_the_bar_before_the_timeout() -> None:
    # GIVEN tqdm's carriage return leaving the watchdog line glued to the bar's
    glued = bar(24) + WATCHDOG.format(r=1, seq=7, op="BROADCAST")
    events = parse_lines([bar(23), glued, bar(25)])
    # THEN the count on the timeout's line is the one the next line went on from
    (working,) = [e for e in events if e.kind == kinds.WORKING]
    assert (working.completed, working.seq) == (24, 25)


def test_a_million_bar_updates_after_a_timeout_give_one_event_per_bar() -> None:
    lines = [bar(1), WATCHDOG.format(r=0, seq=3, op="ALLREDUCE")]
    lines += [bar(2 + i % 30) for i in range(20_000)]
    lines += [b.replace("/32 ", "/90 ") for b in (bar(1), bar(5))]  # a second bar, not timed
    events = parse_lines(lines)
    assert [e.seq for e in events if e.kind == kinds.WORKING] == [2]


def test_no_bar_advance_before_any_timeout_is_evidence() -> None:
    assert not [e for e in parse_lines([bar(n) for n in range(1, 30)]) if e.kind == kinds.WORKING]


def test_a_straggler_report_with_none_is_progress_and_one_naming_ranks_is_a_straggler() -> None:
    none = ["[default0]:=== Straggler Report at Step 10 ===", "[default0]:✓ No stragglers detected"]
    assert judge(none).hang_class is HangClass.HEALTHY
    named = ["=== Straggler Report at Step 20 ===", "", "Detected stragglers: [5, 3, 5]"]
    named += ["  Rank 3 (node-2)", "  Rank 5 (node-3)"]
    verdict = judge(named)
    assert (verdict.hang_class, verdict.culprit_ranks) == (HangClass.STRAGGLER, (3, 5))
    assert "straggler detector" in verdict.summary


def test_a_slow_rank_of_a_job_that_then_hung_is_no_straggler() -> None:
    # GIVEN a straggler report, or NCCL's measurement of a slow link, then a watchdog timeout
    timeout = (
        "[rank0]:[E ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=500, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, "
        "Timeout(ms)=600000) ran for 600086 milliseconds before timing out."
    )
    named = judge(["Detected stragglers: [3]", timeout])
    measured = judge(
        [
            "node0:245 NCCL DIAG [INFO] net bw: cross-nic rank 3 (node0): 265.1 Gbit/s, >30% off "
            "median 391.5 Gbit/s in comm 0x7a3f",
            timeout,
        ]
    )
    # THEN the job hung, which a straggler never makes it (DESIGN): the slow rank is the one
    # to look at, and a link measured that slow is the likely cause
    assert (named.hang_class, named.culprit_ranks) == (HangClass.UNKNOWN, (3,))
    assert (measured.hang_class, measured.culprit_ranks) == (HangClass.NETWORK, (3,))
    assert all("not only slowed" in v.summary for v in (named, measured))


def test_a_report_naming_absurd_ranks_is_bounded() -> None:
    huge = "Detected Stragglers: [" + ", ".join(map(str, range(600))) + "]"
    events = [e for e in parse_lines([huge]) if e.kind == kinds.STRAGGLER]
    assert 0 < len(events) <= 256


FINISHED = [
    "`Trainer.fit` stopped: `max_epochs=3` reached.",  # Lightning, loops/fit_loop.py
    "`Trainer.fit` stopped: `max_steps=1000` reached.",
    "Training completed. Do not forget to share your model on huggingface.co/models =)",
    "INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully "
    "finished. Waiting 300 seconds for other agents to finish.",
    "[after training is done] datetime: 2025-06-09 03:11:52",  # Megatron
    "INFO:torch.distributed.elastic.agent.server.api:Local worker group finished (SUCCEEDED). "
    "Waiting 300 seconds for other agents to finish",  # torchelastic before 2.x
    "lib_trainer_1 exited with code 0",  # Docker Compose
    "[rank0]:[titan] 2025-06-02 15:30:01,995 - root - INFO - Training completed",
    "Training successfully completed!",  # a script's own
    "Training time 0:12:34",  # torchvision's reference scripts, DeiT, MAE, after the loop
    "***** train metrics *****",  # transformers' examples, after trainer.train()
    "Training time 1 day, 2:03:04",
    "[1,31]<stdout>:Process 31 - Training time: 10.09 seconds",
]


def test_a_framework_saying_training_finished_is_a_job_that_ran_to_its_end() -> None:
    # GIVEN a job's start, then a framework's or script's word that training finished
    start = ["Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4", "Starting training ..."]
    for finished in FINISHED:
        assert [e.kind for e in parse_lines([finished], "job.log")] == [kinds.PROGRESS]
        # THEN nothing failed and the job reports progress: healthy
        assert judge([*start, finished]).hang_class is HangClass.HEALTHY, finished


def test_training_that_finished_before_a_timeout_does_not_hide_the_timeout() -> None:
    # GIVEN a run that finished and a later collective that timed out (a second run, an
    # evaluation after fit) THEN the timeout is judged, not the finish
    verdict = judge([FINISHED[0], WATCHDOG.format(r=0, seq=42, op="ALLREDUCE")])
    assert verdict.hang_class is not HangClass.HEALTHY
    # AND one container that succeeded beside one the OOM killer ended (137) is a lost rank
    compose = judge(["trainer_1 exited with code 137", "trainer_2 exited with code 0"])
    assert compose.hang_class is HangClass.RANK_LOSS and "SIGKILL" in compose.summary
    # AND a line like Compose's without its container's replica number is no container's end
    assert parse_lines(["Process exited with code 0"], "job.log") == []
    # AND a line that only mentions training or its completion mid-sentence is no finish
    for other in (
        "Training complete in 3 epochs? check",
        "Starting training ...",
        "Training",
    ):
        assert parse_lines([other], "job.log") == []


PROGRESS_REPORTS = [
    " iteration       10/  500000 | consumed samples:          640 | elapsed time per "
    "iteration (ms): 1234.5 | learning rate: 1.000E-04 | global batch size:    64 | lm loss: "
    "9.876E+00 | loss scale: 1.0 | grad norm: 12.345 |",  # Megatron's training.py
    "[XTuner][RANK 2][2025-08-29 09:17:51][INFO] Step 1/100 data_time: 0.0578 lr: 0.000020 "
    "time: 4.9770 text_tokens: 4008.0 total_loss: 1.722 reduced_llm_loss: 1.684",
    "step 20/1000 loss=2.31",  # a script's own
    "ITER 7/50 | LOSS 0.412",
    "step  6 | epoch 0 | loss 1.3184 | grad_norm 2.0623 | lr 9.52e-06",  # NeMo Automodel
    "epoch 1 step 10 loss 0.31",
    "steps: 10 loss: 2.3456 iter time (s): 0.512 samples/sec: 12.345",  # DeepSpeed's engine
    "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, "
    "lr=[5e-05], mom=[(0.9, 0.999)]",  # DeepSpeed's engine, every steps_per_print steps
    "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | "
    "forward_microstep: 4958.39 | backward_microstep: 4665.83",  # its timers, every step
    "[trainer0|0]:1|26|Loss: 1.2436443567276:  26%|██▌       | 26/101 [06:45<17:27, 13.96s/it]",
    # Lightning's ModelCheckpoint(verbose=True) after a validation
    "Epoch 0, global step 100: 'val_loss' reached 0.12345 (best 0.12345), saving model to "
    "'/ckpt/epoch=0-step=100.ckpt' as top 3",
    "Epoch 1, global step 200: 'val_acc' was not in top 3",
    # transformers' Trainer: a logging step, an evaluation, the run's end
    "{'loss': 0.6931, 'grad_norm': 1.2345, 'learning_rate': 4.5e-05, 'epoch': 0.5}",
    "{'eval_loss': 0.4821, 'eval_accuracy': 0.8123, 'eval_runtime': 2.13, 'epoch': 1.0}",
    "{'train_runtime': 62.12, 'train_samples_per_second': 10.3, 'train_steps_per_second': "
    "1.29, 'train_loss': 0.6512, 'epoch': 1.0}",
    "[1,0]<stdout>:Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.359780",  # PyTorch's examples
    "Test set: Average loss: 0.0327, Accuracy: 9893/10000 (99%)",
    "469/469 [==============================] - 5s 10ms/step - loss: 0.2978 - accuracy: 0.91",
    "469/469 ━━━━━━━━━━━━━━━━━━━━ 5s 10ms/step - accuracy: 0.8712 - loss: 0.4521",  # Keras 3
    "Epoch 0: 100%|██████████| 64/64 [00:02<00:00, 28.53it/s, v_num=0, train_loss=0.512]",
    " 12%|█▏        | 120/1000 [01:02<07:38,  1.92it/s, loss=2.31]",  # a script's tqdm postfix
    # a training epoch's bar that counted a step, whatever its postfix
    "Epoch 0:   7%|▋         | 73017/1017679 [00:38<08:12, 1918.0it/s, v_num=2]",  # Lightning
    "Epoch 3/10:  45%|████▌     | 45/100 [00:10<00:12,  4.50it/s]",  # tqdm(desc="Epoch 3/10")
    "Training epoch_1: 12%|#2 | 120/1000 [01:02<07:38,  1.92it/s]",
    # a server's answered request, and a job that ran to its end
    'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK',  # vLLM's access log
    '[2025-07-29 07:12:06] INFO:     127.0.0.1:49294 - "POST /generate HTTP/1.1" 200 OK',
    "INFO 01-01 10:00:10 metrics.py:351] Avg prompt throughput: 12.3 tokens/s, Avg generation "
    "throughput: 45.6 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs",
    "[2025-01-01 10:00:01] The server is fired up and ready to roll!",  # SGLang, warmed up
    "Job 'raysubmit_abc123' succeeded",  # ray job submit
    "INFO: Job finished (status: SUCCEEDED).",  # SkyPilot
    "✓ Job finished (status: ManagedJobStatus.SUCCEEDED).",
    "2022-09-21 13:39:27,754 sagemaker-training-toolkit INFO     Reporting training SUCCESS",
]


def test_a_step_s_report_or_a_served_request_is_a_job_at_work() -> None:
    # GIVEN a step's report (its counter and the loss it reached), or a request served
    for report in PROGRESS_REPORTS:
        # THEN it is progress, and with nothing failed the job is healthy
        assert [e.kind for e in parse_lines([report], "job.log")] == [kinds.PROGRESS], report
        assert judge(["Starting training ...", report]).hang_class is HangClass.HEALTHY
        # AND beside a collective that timed out, the timeout is judged
        late = judge([report, WATCHDOG.format(r=0, seq=42, op="ALLREDUCE")])
        assert late.hang_class is not HangClass.HEALTHY, report
    # AND a counter without a loss, or a loss without its value, is no report of a step
    for other in (
        "Step 3/10: loading shards",
        "step 4: the loss diverged",
        "Stepping 1/2 with loss",
        "the loss of 1/3 of the ranks",
        "steps: 1000, loss: cross_entropy",
        "{'loss': 'cross_entropy', 'optimizer': 'adamw', 'epoch': 3}",  # a configuration
        "Loading checkpoint shards: 100%|██████████| 4/4 [00:05<00:00,  1.31s/it]",
        "Epoch 0:   0%|          | 0/1000 [00:00<?, ?it/s]",  # before its first step
        "time (ms) | model and optimizer: 5870.73 | train/valid/test data iterators: 558.40",
        "Training time per step: 0.51 s",
        "Epoch 0, global step 0: 'val_loss' reached 0.99 (best 0.99)",  # no step yet
        "***** Running training *****",
        "estimated training time: 3:00:00",
        "1|0|Loss: 2.31:   0%|          | 0/101 [00:00<?, ?it/s]",
        "Validation DataLoader 0: 100%|██████████| 10/10 [00:01<00:00,  9.87it/s]",
        "Epoch 2: loading shards 100%|██████████| 4/4 [00:05<00:00]",  # no bar of steps
        "Epoch 3 [12/100] loss: nan, skipping the step",
        "469/469 - 5s - the loss of rank 2",
        'INFO:     127.0.0.1:39726 - "GET /health HTTP/1.1" 200 OK',  # before any model ran
        'INFO:     127.0.0.1:39726 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
        "Running: 5 reqs",  # requests that generate nothing
        "INFO:     Application startup complete.",
        "Job 'raysubmit_abc123' failed",
        "INFO: Job finished (status: FAILED).",
        "sagemaker-training-toolkit ERROR    Reporting training FAILURE",
    ):
        assert parse_lines([other], "job.log") == [], other


def test_a_report_is_looked_for_in_a_line_s_first_part_only() -> None:
    # GIVEN a step's report behind other text, within the part of a line searched or past it
    report = "step 20/1000 loss=2.31"
    near = "x" * (REPORT_CHARS - len(report) - 1) + " " + report
    far = "x" * REPORT_CHARS + " " + report
    # THEN the first is progress, and the second is not searched (a hostile line built to
    # make the patterns backtrack costs only that part)
    assert [e.kind for e in parse_lines([near], "job.log")] == [kinds.PROGRESS]
    assert parse_lines([far], "job.log") == []


def test_nccl_tests_summary_is_a_sweep_that_ran_to_its_end() -> None:
    # GIVEN nccl-tests' last lines, printed once every size of its sweep ran
    summary = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 113.289", "#"]
    row = "   1048576        262144     float     sum      -1    135.3    7.75   15.02      0"
    # THEN the job ran to its end: healthy
    assert judge([row, *summary]).hang_class is HangClass.HEALTHY
    # AND so it does inside a paragraph a page ran together (not only at a line's start)
    assert judge([" ".join([row, *summary])]).hang_class is HangClass.HEALTHY
    # AND so do the summary without its comment marks (as a launcher's or a page's copy
    # shows it) and the line newer nccl-tests end a test with, each alone
    assert judge([row, "  Avg bus bandwidth    : 137.179"]).hang_class is HangClass.HEALTHY
    concluded = "# Collective test concluded: all_reduce_perf"
    assert judge([row, concluded]).hang_class is HangClass.HEALTHY
    # AND without the summary (a sweep that stopped at a size: it prints the rows of every
    # size before the one it hangs in) nothing says so
    assert judge([row]).hang_class is not HangClass.HEALTHY
    assert parse_lines([row], "job.log") == []


def test_a_run_of_step_reports_is_one_event_at_its_latest_line() -> None:
    # GIVEN a thousand step reports, a watchdog timeout, then one more report
    lines = [f"step {i} loss 0.5" for i in range(1000)]
    lines += [WATCHDOG.format(r=0, seq=42, op="ALLREDUCE"), "step 1000 loss 0.4"]
    events = parse_lines(lines, "job.log")
    # THEN each run of reports is one progress event, at its latest line, in order
    assert [(e.kind, e.text) for e in events if e.kind != kinds.WATCHDOG_TIMEOUT] == [
        (kinds.PROGRESS, "step 999 loss 0.5"),
        (kinds.PROGRESS, "step 1000 loss 0.4"),
    ]
    assert [e.kind for e in events].index(kinds.WATCHDOG_TIMEOUT) == 1


EARLY_STOPS = [
    "[1,0]<stderr>:Epoch 00003: early stopping triggered.",  # Keras through horovodrun
    "Epoch 00007: early stopping",  # Keras' EarlyStopping
    "[ worker 10.0.0.5 ] : Early stopping, best iteration is:",  # LightGBM on Dask
    "Early stopping at epoch 12!",  # a script's own
]


def test_a_rank_that_stopped_early_left_the_loop_its_peers_wait_in() -> None:
    for stop in EARLY_STOPS:
        # GIVEN a rank's early-stopping check that fired
        assert [e.kind for e in parse_lines([stop], "job.log")] == [kinds.STOPPED_EARLY], stop
    # WHEN rank 0 stopped and ranks 1-3 then timed out in the next collective
    waits = [WATCHDOG.format(r=r, seq=42, op="ALLREDUCE") for r in (1, 2, 3)]
    verdict = judge(["[rank0]:Epoch 00007: early stopping", *waits])
    # THEN rank 0 left the loop they wait in
    assert verdict.hang_class is HangClass.COLLECTIVE_MISMATCH
    assert verdict.culprit_ranks == (0,) and "early" in verdict.summary
    # AND a stop alone is no failure, nor a crash of the rank that stopped itself
    assert judge(["Epoch 00007: early stopping"]).hang_class is HangClass.UNKNOWN
    own = judge(["[rank0]:Epoch 00007: early stopping", "[rank0]:Segmentation fault (core dumped)"])
    assert own.hang_class is HangClass.RANK_LOSS
    # AND a setting that names early stopping is no stop
    for setting in ("early_stopping: true", "Using early stopping with patience 3"):
        assert parse_lines([setting], "job.log") == [], setting
