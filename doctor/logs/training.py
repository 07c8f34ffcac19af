"""What the training script says of its own progress: its progress bars, its steps' reports
and its straggler detector's reports.

A tqdm bar (``75% 24/32 [01:09<00:22, 2.83s/it]``) counts work the process that draws it
finished. Read against the watchdog: a bar that counts on after a rank timed out was drawn
by a process still at work in its own code (an evaluation, a save), not waiting in the
collective. Only that advance is kept, once per bar, so a log of a million bar updates
costs nothing. So is a bar whose elapsed time, when the watchdog fired, was already as long
as the collective had waited (``[30:01<57:14`` beside ``ran for 1802246 milliseconds``),
or as a rank had waited on the store (``timed out after 1800000ms``): its process was busy
in that loop the whole time the others waited.

FlagScale's straggler detector prints ``=== Straggler Report at Step N ===`` from rank 0
every few steps, then ``No stragglers detected.`` or ``Detected stragglers: [3, 5]``: it
timed every rank's sections at that step, so the first says the ranks train in step and
the second names the ranks slower than its threshold.

A framework that says training finished (Lightning's ```Trainer.fit` stopped: `max_epochs=3`
reached.``, transformers' ``Training completed. Do not forget to share your model``,
torchelastic's ``worker group successfully finished``, Megatron's ``[after training is
done]``, a script's ``Training completed``) says the job ran to its end.

A step's own report, its counter beside the loss it reached (``step 20/1000 loss=2.31``),
says the job trains: its collectives ran. So do the reports frameworks print at a step's,
an evaluation's or the run's end (transformers' Trainer's dicts, Keras' bar, DeepSpeed's
engine, PyTorch's examples, a bar whose postfix holds the loss, a training epoch's bar that
counted a step). Another bar that reached its total does not: a checkpoint's loading bar
fills before any collective. Nor does a row of
nccl-tests' table: a sweep that hangs prints the rows of every size before it.

A rank's early-stopping check that fired (``Epoch 00003: early stopping``) ended its
training; where its peers went on, they wait for it in the next collective.

A script that says one rank does a job's shared work alone (Megatron's ``building the
indices on rank 0``) says the others wait for it at the next collective or barrier.
"""

from __future__ import annotations

import re

from doctor.evidence import LogEvent
from doctor.logs import kinds
from doctor.logs.lines import Line

_BAR = re.compile(r"(\d{1,18})/(\d{1,18}) \[(?:(\d{1,9}):)?(\d{1,2}):(\d{2})<")
"""tqdm's ``n/total [elapsed<remaining`` (the rest of the bar is the user's to change)."""
_COUNTED_BAR = r"%\|[^|]{0,120}\|\s{0,3}[1-9]\d{0,11}/\d{1,12} \["
"""The end of a tqdm bar's percentage, its bar and a count of at least one step: ``%|▋ |
73017/1017679 [``, not ``%|  | 0/1000 [`` before the first step."""
_STEP_DONE = re.compile(
    r"\b(?:[Ss]teps?|STEPS?|[Ii]ter(?:ation)?|ITER)\b\s{0,3}[:=\[]?\s{0,20}\d{1,12}\b"
    r"(?:\s{0,20}/\s{0,20}\d{1,12}\b)?.{0,400}?(?:loss|LOSS|Loss)\b\s{0,3}[:=]?\s{0,3}-?\.?\d"
    # transformers' Trainer logs a dict per logging step, evaluation and run's end
    r"|\{'(?:(?:train_|eval_)?loss|(?:train|eval)_runtime)': '?-?\d[^{}]{0,600}'epoch': '?\d"
    # PyTorch's examples: ``Train Epoch: 1 [640/60000 (1%)]  Loss: 1.36``, then the test set
    r"|\b[Ee]poch:?\s{0,3}\d{1,9}\s{0,3}\[\s{0,12}\d{1,12}/\d{1,12}\b.{0,60}?\b[Ll]oss: -?\d"
    r"|\bAverage loss: -?\d.{0,60}?\bAccuracy: \d{1,12}/\d{1,12}\b"
    # Keras' bar at a step's end (``469/469 [====] - 5s 10ms/step - loss: 0.30``)
    r"|\b\d{1,12}/\d{1,12} .{0,120}?/step - .{0,200}?\bloss: -?\.?\d"
    # a tqdm bar (Lightning's too) whose postfix holds the loss a step reached
    r"|\b\d{1,12}/\d{1,12} \[\d[^\]]{0,80}(?:it/s|s/it)[^\]]{0,300}?loss=-?\.?\d"
)
"""A training step's own report: its counter (against the run's length or not) and the loss
it reached (Megatron's ``iteration 10/ 500000 | ... | lm loss: 1.0E+01``, XTuner's ``Step 1/100
... total_loss: 1.722``, NeMo Automodel's ``step 6 | epoch 0 | loss 1.3184``, DeepSpeed's
``steps: 10 loss: 2.3456``, most scripts' ``step 20/1000 loss=2.31``; transformers'
``{'loss': 0.69, ..., 'epoch': 0.5}``; ``Epoch 0: 100%|█| 64/64 [00:02<00:00, 28.5it/s,
train_loss=0.51]``): a step ran to its end."""
_TRAINING_BAR = re.compile(
    r"(?:\b[Ee]poch[ _]?\d{1,9}(?:/\d{1,9})?\s{0,3}:?\s{0,3}\d{0,2}"
    r"|\b[Ll]oss: -?\.?\d[^|]{0,200})\d" + _COUNTED_BAR
)
"""A tqdm bar that counted a step and whose description says it is training's: labelled as
an epoch (Lightning's ``Epoch 0:  7%|▋ | 73017/1017679 [00:38<08:12, v_num=0]``, a script's
``tqdm(desc=f"Epoch {e}/{n}")``) or holding the loss (torchtune's ``1|26|Loss: 1.24:  26%|██▌
| 26/101 [06:45<``), whatever its postfix holds: its steps ran. Not its ``0/1000`` before
the first step, nor a bar of another loop (``Loading checkpoint shards: 100%``), which may
fill before any collective. Searched only in a line that holds ``%|`` (few of a big log's)."""
_DEEPSPEED_STEP = re.compile(
    r"\bstep=\d{1,12}, skipped=\d{1,12}, lr=\["
    r"|\btime \(ms\) \| (?:forward|backward|step)(?:_microstep)?: \d"
)
"""DeepSpeed's engine every ``steps_per_print`` optimizer steps (``engine.py``), with no loss,
and its step's timers with ``wall_clock_breakdown`` (``rank=0 time (ms) | forward_microstep:
4958.39 | backward_microstep: ...``; not Megatron's set-up timers, ``time (ms) | model and
optimizer: ...``)."""
_CHECKPOINTED = re.compile(
    r"\bEpoch \d{1,9}, global step [1-9]\d{0,12}: '[^']{1,120}' (?:reached |was not in top )"
)
"""Lightning's ``ModelCheckpoint`` (``verbose=True``) after a validation: ``Epoch 0, global
step 100: 'val_loss' reached 0.12345 (best 0.12345), saving model to ...`` or ``... was not
in top 3``: that many steps ran."""
_SERVED = re.compile(
    r"\"POST /(?:v1/(?:chat/)?completions|v1/embeddings|generate) HTTP/\d(?:\.\d)?\" 200\b"
    r"|Avg generation throughput: (?!0(?:\.0{1,9})? )\d{1,9}(?:\.\d{1,9})? tokens/s"
    r"|The server is fired up and ready to roll!"
)
"""An inference server's answered request: an access log's generation request that returned
200 (vLLM, SGLang), vLLM's metrics with tokens generated, SGLang's line once its warm-up
request came back (``http_server.py``). Not a health check's 200: a server answers it
before its model ever ran."""
_RAN_FOR = re.compile(r"ran for (\d{1,18}) milliseconds|timed out after (\d{1,18}) ?ms")
_WAITS = frozenset({kinds.WATCHDOG_TIMEOUT, kinds.STORE_TIMEOUT})
BUSY_SHARE = 0.9
"""A bar that had run this share of the watchdog's wait was busy through it."""
_NO_STRAGGLERS = re.compile(r"No stragglers detected")
_STRAGGLERS = re.compile(r"Detected [Ss]tragglers: ?\[([\d, ]{1,4000})")
"""No closing bracket needed: a line cut at its bound still names ranks."""
RANK0_WORK = re.compile(
    r"\b(?:build|creat|preprocess|download|tokeniz|writ|sav|cach|convert)\w*\b.{0,60}? "
    r"on (?:rank 0|the (?:main|master) process)\b"
)
"""A script's own word that rank 0 does shared work alone while the others wait."""
FINISHED = re.compile(
    r"`Trainer\.fit` stopped: `max_(?:epochs|steps)=\d{1,18}` reached|"
    r"Training completed\. Do not forget to share your model|"
    r"worker group successfully finished|"
    r"Local worker group finished \((?:WorkerState\.)?SUCCEEDED\)|"
    r"\[after training is done\]|"
    r"\bTraining (?:successfully )?(?:complete|completed|finished|done)\b[.!]?\s*$|"
    r"\*{5} train metrics \*{5}|"
    r"\bTraining time:? (?:\d{1,5} days?, )?(?:\d{1,6}:\d{2}:\d{2}|"
    r"\d{1,9}(?:\.\d{1,6})? ?(?:s|secs?|seconds))\s*$|"
    r"(?:^|\s)(?:#\s{0,4})?(?:Avg bus bandwidth\s{0,20}:\s{0,20}\d|Collective test concluded: \w)|"
    r"\bJob '[\w.-]{1,120}' succeeded\b|"
    r"\bJob finished \(status: (?:ManagedJobStatus\.)?SUCCEEDED\)|"
    r"\bReporting training SUCCESS\b"
)
"""What frameworks and launchers print once training ended as asked: Lightning's fit loop
(``loops/fit_loop.py``), transformers' Trainer, torchelastic's agent (``agent/server/api.py``,
its older releases' ``Local worker group finished (SUCCEEDED)``), Megatron's ``training.py``,
transformers' examples' ``***** train metrics *****`` (``log_metrics`` after
``trainer.train()``); and a line that ends saying so, as torchtitan's ``train.py`` and many
a script's own ``Training complete!`` do; the run's length printed after its training loop
(torchvision's reference scripts and those built on them, DeiT and MAE: ``Training time
0:12:34``; a script's ``Training time: 10.09 seconds``); and nccl-tests' ``# Avg bus
bandwidth : 113.289`` and, in newer releases, ``# Collective test concluded: all_reduce_perf``,
printed once every size of its sweep ran (``src/common.cu``; a copy by a launcher or a page
may drop the ``#``); and a
launcher's word that the job ran to its end: Ray's ``ray job submit`` (``Job '...'
succeeded``), SkyPilot's ``sky jobs launch`` and ``sky launch`` (``Job finished (status:
SUCCEEDED)``), SageMaker's training toolkit (``Reporting training SUCCESS``).
(Docker Compose's ``trainer_1 exited with code 0`` is read with its other exit codes,
``doctor.logs.launcher``.)"""
EARLY_STOP = re.compile(
    r"\b[Ee]arly[ _]stopping(?: triggered| at (?:epoch|step|iteration) \d{1,12})?\s{0,4}(?:[.,!]|$)"
)
"""A rank's own early-stopping check firing: Keras' callback (``Epoch 00003: early stopping``),
LightGBM's (``Early stopping, best iteration is:``), a script's ``early stopping triggered.``;
not a setting (``early_stopping: true``, ``using early stopping with patience 3``)."""
MAX_STRAGGLERS = 256
"""Ranks one report may name: a report naming more says the job is slow, not who is."""


REPORT_CHARS = 2_048
"""How much of a line the progress reports are looked for in: a report says its counter and
its loss in its first few hundred characters (a Lightning bar with its metrics, Megatron's
iteration line), and a line built to make the patterns backtrack costs 8 times less than
at the 16 KB a line is read to."""


def reports_progress(raw: str) -> bool:
    """Whether a line is a training step's report (``_STEP_DONE``, ``_DEEPSPEED_STEP``,
    ``_TRAINING_BAR``, ``_CHECKPOINTED``) or a server's answered request (``_SERVED``), told
    as progress by the parser once per run of them (a word that the run ended is
    ``FINISHED``, read once); the substring tests first keep the searches off the lines of
    a big log that say none of these. Not a row of nccl-tests' table: a sweep that hangs at a
    size prints the rows of every size before it."""
    raw = raw[:REPORT_CHARS]
    return (
        (("oss" in raw or "OSS" in raw) and _STEP_DONE.search(raw) is not None)
        or (("skipped=" in raw or "time (ms)" in raw) and _DEEPSPEED_STEP.search(raw) is not None)
        or ("%|" in raw and _TRAINING_BAR.search(raw) is not None)
        or ("global step" in raw and _CHECKPOINTED.search(raw) is not None)
        or (
            ("HTTP/" in raw or "hroughput" in raw or "roll!" in raw)
            and _SERVED.search(raw) is not None
        )
    )


def events(line: Line) -> list[LogEvent]:
    """A straggler detector's conclusion, or rank 0 at shared work alone."""
    text = line.text
    if (" on rank 0" in text or "ster process" in text or "ain process" in text) and (
        RANK0_WORK.search(text)
    ):
        return [line.event(kinds.WAITS_FOR_MAIN, rank=0)]
    if _NO_STRAGGLERS.search(text) or FINISHED.search(text):
        return [line.event(kinds.PROGRESS, rank=None)]
    if "arly" in text and EARLY_STOP.search(text):
        return [line.event(kinds.STOPPED_EARLY)]
    if m := _STRAGGLERS.search(text):
        numbers = m.group(1).replace(",", " ").split()
        ranks = sorted({int(r) for r in numbers if len(r) <= 6})  # a longer number is no rank
        return [line.event(kinds.STRAGGLER, rank=r) for r in ranks[:MAX_STRAGGLERS]]
    return []


class BarWatch:
    """The progress bars of one text, read against its watchdog and store timeouts."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        """A bar's total -> the count it showed last before the first timeout."""
        self._timed_out = False
        self._told: set[int] = set()
        self._elapsed: dict[int, tuple[int, int]] = {}
        """A bar's total -> (seconds it had run, count) as last drawn before the timeout."""

    def feed(self, line: Line, found: list[LogEvent]) -> list[LogEvent]:
        """``found``: what the other parsers read from the same line (a bar and a watchdog
        message often share one, the bar's carriage return having no newline)."""
        out: list[LogEvent] = []
        for m in _BAR.finditer(line.text):
            count, total = int(m.group(1)), int(m.group(2))
            before = self._counts.get(total)
            if not self._timed_out:
                self._counts[total] = count
                hours, minutes, seconds = (int(g or 0) for g in m.group(3, 4, 5))
                self._elapsed[total] = (3600 * hours + 60 * minutes + seconds, count)
            elif before is not None and count > before and total not in self._told:
                self._told.add(total)
                out.append(
                    line.event(
                        kinds.WORKING,
                        seq=count,
                        completed=before,
                        text=f"a progress bar went on from {before}/{total} to {count}/{total} "
                        "after the watchdog timeout",
                    )
                )
        timeout = any(e.kind in _WAITS for e in found)
        if timeout and not self._timed_out and (waited := _RAN_FOR.search(line.text)):
            out += self._busy_all_along(line, int(waited.group(1) or waited.group(2)) / 1000)
        self._timed_out |= timeout
        return out

    def _busy_all_along(self, line: Line, waited: float) -> list[LogEvent]:
        """The bars that had been running for as long as the collective waited."""
        return [
            line.event(
                kinds.WORKING,
                rank=None,  # the bar's process, not the rank whose watchdog fired
                seq=count,
                text=f"a progress bar had run {seconds // 60}:{seconds % 60:02d} when the "
                f"wait timed out after {waited:.0f} s",
            )
            for total, (seconds, count) in self._elapsed.items()
            if seconds >= BUSY_SHARE * waited
        ][:1]
