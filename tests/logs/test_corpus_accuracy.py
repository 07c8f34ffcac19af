"""The labelled corpus of real logs: no case crashes; class accuracy holds its measured floor.

Issue 13's target is 85%; the rules reach 85% (35 of 41). ``benchmarks/bench_logs.py``
reports against the target and fails when it is missed; this test guards the floor.
"""

from __future__ import annotations

import pytest
from corpus import HELDOUT, RENAMED, Case, cases, score, split_of

from doctor.model import HangClass

FLOOR = 0.80
"""What the rules reach today less a margin: a change that loses cases fails here."""


def test_the_corpus_is_there_and_every_case_lists_its_files() -> None:
    found = cases()
    assert len(found) >= 40
    for case in found:
        assert case.files and all(f.is_file() for f in case.files), case.name


def test_no_case_crashes_and_accuracy_holds() -> None:
    # GIVEN every case of the corpus WHEN each is judged from its files alone
    result = score()
    # THEN none crashes, and accuracy does not fall below what the rules reach
    assert [o.case.name for o in result.outcomes if o.error] == []
    misses = [o.case.name for o in result.outcomes if not o.class_right]
    assert result.accuracy >= FLOOR, misses


# The held-out corpus (issue 23): split by source repository before its rules were written.
HELDOUT_TEST_FLOOR = 269 / 425
"""Measured on the test split: 269 of 425 (63.3 %), stop 59: the fifty-second look's 404 (below)
and 21 test cases added after it (12 working jobs' logs, 9 hangs), judged first by a second look
of their own on the same reading (commit 1839f60, whose verdicts' classes are a074e31's): 8
right (4 of the 12 working jobs' logs, 4 of the 9 hangs; no hang called healthy). Measured on
the test split: 261 of 404 (64.6 %), the fifty-second look (stop 59, commit a074e31, frozen),
held out: the same count as before it (one working job's log lost, one gained; still one hang
called healthy). Before it, 261 of 404 (64.6 %), stop 58: the fifty-first look's 396 (below) and
8 test cases added after it, judged first by a second look of their own on the same frozen
reading (commit 9117e33, whose verdicts' classes are e2405c9's): 1 right (none of their 6
working jobs' logs, 1 of their 2 set-up failures; no hang called healthy). Measured on the test
split: 260 of 396 (65.7 %), the fifty-first look (stop 58, commit e2405c9, frozen), held out:
rules alone 208; the word model 124 guesses, 48 right; its fallback 11, 4 right. The 340 cases
of the last look 225 (219 before: working jobs' logs 28 of 64, 22 before; hangs 197 of 276, as
before); the 56 added this stop, judged first by this look, 35: 25 of their 42 working jobs'
logs, 10 of their 14 hangs. One hang is called healthy (which, and by which reading, not looked
at). Stop 57: 219 of 340 (64.4 %), the fiftieth look (commit 39b07a1, frozen), held out for its
3 new cases (2 right); rules alone 168; the word model 116 guesses, 47 right; its fallback 10, 4
right. Before it, the forty-ninth look (stop 57, commit dbb11cd, frozen): 217 of 337, held out:
rules alone 166; the word model 115 guesses, 47 right; its fallback 10, 4 right. The 329 cases
of the last look 212 (211 before; the stop's reading and the model's retraining moved 2
verdicts' classes, compared, not scored); the 8 added this stop, judged first by this look, 5.
Stop 56: 211 of 329 (64.1 %), the forty-eighth look (commit e1ec9c1, frozen), held out: rules
alone 162; the word model 112 guesses, 45 right; its fallback 10, 4 right. The 292 cases of the
last look 198 (198 before; the stop's readings and the model's retraining moved no verdict's
class, compared, not scored); the 37 added this stop, judged first by this look, 13: 12 of their
33 healthy jobs' logs, 1 of the other 4 (healthy jobs' logs: 22 of all 64 right, and no hang
called healthy; without them 189 of 265, 71.3 %). Stop 55: 198 of 292 (67.8 %), the
forty-seventh look (stop 55, commit 84ed638, frozen), held out: rules alone 149; the word model
95 guesses, 45 right; its fallback 8, 4 right. The 290 cases of the last look 197 (195 before;
the stop's readings and the model's retraining moved 5 verdicts' classes, compared, not scored);
the 2 added this stop, judged first by this look, 1 (healthy jobs' logs: 10 of all 31 right, and
no hang called healthy). Stop 54: 195 of 290 (67.2 %), the forty-sixth look (stop 54, commit
66a7279, frozen), held out: rules alone 145; the word model 98 guesses, 46 right; its fallback
8, 4 right. The 278 cases of the last look 191 (189 before; the stop's readings and the model's
retraining moved 7 verdicts' classes, compared, not scored); the 12 added this stop, judged
first by this look, 4 (healthy jobs' logs: 8 of all 30 right, and no hang called healthy). Stop
53: 189 of 278 (68.0 %), the forty-fifth look (stop 53, commit 858b990, frozen), held out: rules
alone 139; the word model 95 guesses, 46 right; its fallback 7, 4 right. The 258 cases of the
last look 178 (179 before; the word model's retraining moved 4 verdicts' classes, compared, not
scored); the 20 added this stop, judged first by this look, 11 (healthy jobs' logs: 2 of all 19
right). Stop 52: 179 of 258 (69.4 %), the forty-fourth look (stop 52, commit 33a91a7, frozen),
held out: rules alone 131; the word model 86 guesses, 44 right; its fallback 7, 4 right. The 218
cases of the last look 163 (163 before; the stop's readings and two retrainings moved 1
verdict's class, compared, not scored); the 40 added this stop, judged first by this look, 16: 1
of their 14 healthy jobs' logs (no rule reads a working job's output unless it says training
finished, and the word model guesses only hangs), 15 of the other 26. Stop 51: 163 of 218 (74.8
%), the forty-third look (commit a0883fa, frozen), held out: rules alone 124; the word model 60
guesses, 35 right; its fallback 6, 4 right. The 202 cases of the last look 153 (155 before: the
stop's readings and retraining moved 4 verdicts' classes, compared, not scored); the 16 added
this stop, judged first by this look, 10. Stop 50: 155 of 202 (76.7 %), the forty-second look
(commit 92b3455, frozen), held out: rules alone 118; the word model 55 guesses, 33 right; its
fallback 5, 4 right. The 185 cases of the last look 141 (139 before); the 17 added this stop,
judged first by this look, 14. Stop 48: 139 of 185 (75.1 %), the fortieth look (commit 2972214,
frozen), held out: rules alone 106; the word model 53 guesses, 30 right; its fallback 4, 3
right; one verdict changed class since the thirty-ninth look (a warning no longer read as a
backend's refusal). Stop 45: 138 of 185 (74.6 %), the thirty-eighth look (87041b8), held out:
rules alone 105; the word model 54 guesses, 30 right; its fallback 4, 3 right. The 178 cases of
the last look 135 (3 verdicts changed class; the word model retrained on 5 more dev cases and on
the logging formats' words; a fresh-clone run of 024da5b, the first retraining alone, had
already failed this test), the 7 added this stop 3. Stop 44: 137 of 178 (77 %), the thirty-
seventh look (e74a95d), held out: rules alone 102; the word model 50 guesses, 32 right; its
fallback 4, 3 right. The 174 cases of the last look 134 (no verdict changed class), the 4 added
this stop 3. Stop 43: 134 of 174, the thirty- sixth look (cf4c8ad), rules alone 99; the word
model 49 guesses, 32 right; its fallback 4, 3 right; the same as the thirty-fifth (stop 42,
81f231c). Stop 41: 131, the thirty-fourth look (93b2072), rules alone 97; the word model 52
guesses, 34 right. Stop 40: 132, the thirty- third look (2caebfa), rules alone 98, the model 53
guesses, 34 right. Stop 39: 132, the thirty-second look (8e13558), rules alone 98, the model 52
guesses, 34 right. Stop 38: 132, the thirty-first look (27cc7fb), held out but for the thirtieth
(130, a failed run of this test); rules alone 99, the model 51 guesses, 33 right. Stop 37: 128
held out (3044367), then 129 and 131, not held out; stop 36: 125 held out, then 126 (not held
out); stop 35: 122; earlier: 19 and 22 of 37, then 27/50, 27/52, 32/60, 32/60, 38/63, 38/64,
45/66, 54/79, 60/86, 67/94, 75/105, 78/115, 79/115, 83/124, 83/124, 105/137, 107/137 (not held
out), 110/153, 115/164, 120/174, 121/174 (a failed full-suite run's number) and 122/174. No rule
and no word of the model came from a test case. The issue's target is 85 %, missed; this floor
is the measured value, not the target."""
HELDOUT_TEST_HANGS_CALLED_HEALTHY = 1
"""Hangs of the test split called healthy, measured by the fifty-first look (stop 58; none
before it) and again by the fifty-second (stop 59): the most a change may leave. None on the
dev split: a working job's log may be called a hang, a hang must not be called a working job's."""
HELDOUT_DEV_FLOOR = 495 / 592
"""Measured on the dev split: 495 of 592, in sample for the rules and the word model (stop 59: nine
working jobs' logs added after the look, judged on arrival: 1 right; the model unchanged, it
learns no working job's log. Before them, 494 of 583, stop 59: one more dev case, read wrong on
arrival; four warnings more told harmless, +4; two that name a hang no proof of a working job,
-3). Before: 493 of 582 (stop 58: seven more dev cases, working jobs' logs, added after the look
and judged on arrival by 9117e33: 1 right; the model unchanged (it learns no working job's log).
Before them: 492 of 575; thirty dev cases added, 18 of them working jobs' logs, judged on
arrival by e050bb7: 14 right; the model retrained on them: 483; warnings working jobs print read
as such, and nccl-tests' summary without its comment marks and its closing line read as a
sweep's end (from nine of them and two earlier ones), the model retrained: 492. Stop 57: one
more dev case, right on arrival by 664363b, the model retrained: 465 of 545. Before it: three
dev cases added, judged on arrival by 5040619: 1 right; NCCL's topology code failing to read a
device's attribute read as set-up since (from one of them), the model retrained: the 541 before
them unchanged, 2 of the 3; the third, a working job's NCCL INFO lines, the word model calls
network. Stop 56: a training epoch's bar that counted a step read as progress, from one dev
case: 454 of 525; sixteen dev cases added, 14 of them working jobs' logs, judged on arrival by
7d0df0e: 4 right; DeepSpeed's step timers, a bar whose description holds the loss and the run's
length after the training loop read since (from three of them), the model retrained: 462). Stop
55: 453 of 525 (the reports frameworks print at a step's or the run's end, a server's answered
request and a launcher's word that the job ended read as progress (one dev case, from its
SageMaker line); a lone all-gather timeout read as ranks that did not agree on it (from three
dev cases; one lost); 449 of the 523 before them: 452; two dev cases added, judged on arrival by
46bd1b6: 1 right, by the rules alone; the model retrained on them). Stop 54: 449 of 523 (stop
54: a step's report and nccl-tests' summary read as progress, from two earlier dev cases, 439 of
516; seven dev cases added, judged on arrival by c6e7fc6: 2 right, by the word model; a report
without the run's length read since (from one of them), an early stop read since (from one of
them and an earlier one), the model retrained: 444 of the 516, and 5 of the 7). Stop 53: 437 of
516 ( thirteen dev cases added, judged on arrival by cb35f1f: 6 right, all by the rules alone;
DDP's own C++ lines and Open MPI's MPI_Init banner read since (from two of them); the model
retrained on them: 428 of the 503 earlier ones right, 3 fewer, the model's guesses moving, and 9
of the 13). Stop 52: 431 of 503 (twenty-three dev cases added in two batches, nine of them
healthy jobs' logs; the first seventeen judged on arrival by 84e62ef: 6 right, all by the rules
alone; a framework's word that training finished and two set-up messages read since (from three
of them); the other six judged on arrival by cc18dba: 2 right, by the rules alone, the four
healthy ones missed; the model retrained on them; Docker Compose's container exits read since,
from one of them: 414 of 480 before them). Stop 51: 414 of 480 (fourteen dev cases added, judged
on arrival by the stop's first code (6d68ae8): ten right, all by the rules alone; the runtimes'
failure words read since (a703a1b, one reading, XLA's device out-of-memory, from a new case) and
the model retrained on them; 404 of 466 before). Stop 50's 403 of 466 (stop 50: four dev cases
added, judged on arrival by 2ae8c8a: one right, by the model, none by the rules alone; the model
retrained on them; 402 of 462 before). Stop 45's 401 of 462 (stop 45: five dev cases added, each
right on arrival by rules alone, one by the code of stop 44's end (f409593), four by ca82851;
the model retrained, no dev verdict moved). Stop 44's 396 of 457 (one dev case added, judged on
arrival by the stop's code of then (4badedb): rules alone unknown, with the model right; no
other dev verdict moved). Stop 43's 395 of 456 (no case added; 394 at its start, the rendezvous
reading +1). Stop 42's 394 (no case added: 388 at its start). Stop 41's 387; its 45 new dev
cases, each judged on arrival by the code before any change it could inform: 18 on the stop's
second commit (dbb3dfc), rules alone 7, with the model 9; 7 on it with the ColossalAI build
reading written from the first 18 (in 0a16d2d), 1 and 4; 2 on 0a16d2d's readings, 0 and 1; 5 on
c27952a, 1 and 3; 12 on a4d2cdb, 4 and 7; 1 on a4d2cdb, 0 and 0 (together 24 of 45, 53 %; rules
alone 13). Stop 40's 346 of 411; its 29 new dev cases, each judged on arrival by the code before
any change it could inform: 14 on the stop's first code (7792d00), rules alone 2, with the model
6 (the last 4 of them judged alike by the code of their arrival); 10 on 8c86f52, rules alone 7,
with the model 8; 5 on c529c61, 3 and 3 (together 17 of 29, 59 %). Stop 39's 324 of 382; its 22
new dev cases, judged on arrival by the code before any change they could inform (commit
b6c3b4b, and the stop's first code, 6f7fd95, alike): rules alone 2, with the model 6 (27 %).
Stop 38's 312 of 360; its 51 new dev cases, judged on arrival by the code before any change they
could inform: 45 on commit 7c6bd04, rules alone 8, with the model 17; 6 on 71ceed8, 2 and 2
(together 19 of 51, 37 %). Stop 37's 67, judged the same way: 35 on commit b93568b, rules alone
11, with the model 19; 9 on 0cecfad, 2 and 4; 7 on 1804539, 1 and 2; 4 on 33f19a3, 1 and 3; 12
from documentation on 7db0df3, 5 and 9 (together 37 of 67, 55 %). Stop 36's 43 new dev cases,
judged the same way: 16 on commit 5fef782, rules alone 7, with the model 10; 16 on e1ebc57, 5
and 9; 11 on 85aa2d3, 1 and 4 (together 23 of 43, 53 %). Stop 35's 46: on arrival 23 (50 %);
stop 34's 16: rules alone 4, with the model 8."""


def test_every_heldout_case_sits_in_the_split_its_repository_gives() -> None:
    # GIVEN the held-out cases WHEN each one's split is recomputed from its repository alone
    found = cases(HELDOUT)
    # THEN it is the split its case.toml records: no case was moved by hand
    assert len(found) >= 630
    assert {c.name: c.split for c in found} == {c.name: split_of(c.repository) for c in found}
    for case in found:
        assert case.files and all(f.is_file() for f in case.files), case.name


def test_a_renamed_project_is_recorded_under_one_name() -> None:
    # GIVEN projects known under two names that hash to different splits
    # THEN no case is recorded under the old name: a project sits on one side of the split
    assert [c.name for c in cases() + cases(HELDOUT) if c.repository in RENAMED] == []
    assert any(split_of(old) != split_of(new) for old, new in RENAMED.items())


def test_no_heldout_case_is_a_thread_the_rules_were_written_from() -> None:
    # GIVEN the in-sample corpus (rules were written from it) and the held-out one
    def thread(case: Case) -> str:
        return case.source.split("#", 1)[0].rstrip("/")

    in_sample = {thread(c) for c in cases()}
    # THEN no held-out case comes from one of those threads
    assert [c.name for c in cases(HELDOUT) if thread(c) in in_sample] == []


@pytest.mark.parametrize(
    ("split", "floor"),
    [("test", HELDOUT_TEST_FLOOR), ("dev", HELDOUT_DEV_FLOOR)],
    ids=["test-split", "dev-split"],  # `-k "not test-split"` leaves the test split unjudged
)
def test_heldout_split_accuracy_holds_and_no_hang_is_called_healthy(
    split: str, floor: float
) -> None:
    # GIVEN one split of the held-out corpus WHEN each case is judged from its files alone
    result = score(HELDOUT, split)

    # THEN none crashes, no hang is called healthy (a working job's log may be), and accuracy
    # holds its floor; a failure names dev cases, and only counts test ones (a name read
    # in CI's output is a case someone may write a rule from)
    def named(found: list[str]) -> list[str] | str:
        return found if split == "dev" else f"{len(found)} test cases (names withheld)"

    crashed = [o.case.name for o in result.outcomes if o.error]
    assert not crashed, named(crashed)
    healthy = [
        o.case.name
        for o in result.outcomes
        if o.verdict
        and o.verdict.hang_class is HangClass.HEALTHY
        and o.case.hang_class is not HangClass.HEALTHY
    ]
    assert len(healthy) <= (HELDOUT_TEST_HANGS_CALLED_HEALTHY if split == "test" else 0), named(
        healthy
    )
    misses = [o.case.name for o in result.outcomes if not o.class_right]
    assert result.accuracy >= floor - 1e-9, named(misses)
    # AND precision per class is computed for every class a verdict named
    assert all(row[2] for row in result.per_class() if row[2])
