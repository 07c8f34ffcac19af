"""The word model: trained only from what rules may be written from, reproducible from the
corpus, a low-confidence guess only where logs alone said nothing a rule reads."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from clitools import load_tool, run_cli
from corpus import HELDOUT, cases
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.evidence import Evidence, LogEvent
from doctor.logs import read_logs
from doctor.logs.words import LONGEST, MAX_WORDS, words_in
from doctor.model import Confidence, HangClass
from doctor.verdict import log_rules
from doctor.verdict.log_words import MIN_POSTERIOR, MIN_WORDS, WordModel, model

ROOT = Path(__file__).parents[2]
SHIPPED = ROOT / "doctor" / "data" / "word_model.json"


def _tool() -> ModuleType:
    return load_tool("train_word_model")


def test_the_shipped_model_is_what_the_tool_makes_and_it_never_read_a_test_case() -> None:
    # GIVEN the model the package ships WHEN the tool trains one again from the corpus
    tool = _tool()
    shipped = json.loads(SHIPPED.read_text())
    # THEN they are the same (a new case or a reader change means running the tool again)
    assert tool.train(tool.examples()) == shipped
    # AND no case it learned from is in the held-out test split
    test_split = {c.name for c in cases(HELDOUT, "test")}
    assert test_split and not test_split & set(shipped["trained_on"])
    # AND it has no healthy class (it guesses among hangs), nor a backend's refusal (which
    # the rules read in its own words)
    assert not {"healthy", "unknown", "unsupported_op"} & set(shipped["classes"])
    # AND every class it guesses was learned from cases of two projects or more
    learned = [c for c in cases() + cases(HELDOUT, "dev") if c.name in shipped["trained_on"]]
    for name in shipped["classes"]:
        projects = {c.repository or c.name for c in learned if c.hang_class.value == name}
        assert len(projects) >= tool.MIN_REPOSITORIES, name


TINY = {
    "alpha": 0.5,
    "classes": {
        "bootstrap": {"interface": 3, "socket": 3, "error": 2},
        "rank_loss": {"signal": 3, "killed": 3, "error": 2},
    },
}


def test_a_guess_names_the_class_and_the_words_that_favour_it() -> None:
    tiny = WordModel.of(TINY)
    guess = tiny.guess(["signal", "killed", "error", "unheard"])
    assert guess is not None and guess.hang_class is HangClass.RANK_LOSS
    assert guess.words == ("killed", "signal")  # "error" favours neither
    assert tiny.guess(["unheard", "words"]) is None  # nothing the model knows
    assert tiny.guess(["error"]) is None  # 50 %: below the threshold
    # one word of the model is any text's ("hello, my job hangs"): no guess rests on it alone
    assert tiny.guess(["killed", "unheard"]) is None
    assert tiny.guess(["killed", "signal"]) is not None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(sorted(set().union(*json.loads(SHIPPED.read_text())["classes"].values())))
        | st.text(max_size=12),
        max_size=60,
    )
)
def test_any_words_give_a_hang_class_above_the_threshold_or_nothing(words: list[str]) -> None:
    guess = model().guess(words)
    if guess is not None:
        assert guess.hang_class not in (HangClass.HEALTHY, HangClass.UNKNOWN)
        assert MIN_POSTERIOR <= guess.posterior <= 1 + 1e-9
        assert set(guess.words) <= set(words)
        assert len(model().known(words)) >= MIN_WORDS


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_words_of_any_text_are_lowercase_words_of_bounded_length(text: str) -> None:
    for word in words_in(text):
        assert 3 <= len(word) <= LONGEST and word == word.lower() and word[0].isalpha()


def test_a_hostile_log_with_endless_distinct_words_is_bounded_and_says_so(tmp_path: Path) -> None:
    log = tmp_path / "noise.log"
    abc = "abcdefghijklmnopqrstuvwxyz"
    words = (abc[i % 26] + abc[i // 26 % 26] + abc[i // 676 % 26] for i in range(3 * MAX_WORDS))
    log.write_text("".join(f"ERROR {w}\n" for w in words))
    reading = read_logs([log])
    assert len(reading.words) <= MAX_WORDS
    assert any("bound words" in s.reason for s in reading.skipped)


def _silent(words: tuple[str, ...], **more: object) -> Evidence:
    return Evidence(job="j", ranks_expected=None, log_files=("a.log",), log_words=words, **more)  # type: ignore[arg-type]


def test_only_logs_that_no_rule_read_are_guessed_and_at_low_confidence() -> None:
    words = ("process", "signal", "killed", "exitcode")
    # GIVEN logs alone, no line a rule reads WHEN the log rules judge them
    [guessed] = log_rules.candidates(_silent(words))
    # THEN the silent candidate becomes the class the words resemble, low, saying it guessed
    assert guessed.hang_class is HangClass.RANK_LOSS and guessed.confidence is Confidence.LOW
    assert guessed.rule == "log_silent+words" and "a guess from words" in guessed.summary
    assert guessed.evidence[-1].source == "word-model"
    # AND logs beside live stacks or a rule's finding are not guessed at
    from doctor.evidence import RankStack

    live = _silent(words, stacks=(RankStack(0, (), "py-spy"),))
    assert all(c.rule != "log_silent+words" for c in log_rules.candidates(live))
    xid = LogEvent(
        None, "gpu_fault", "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus", code=79
    )
    assert all("+words" not in c.rule for c in log_rules.candidates(_silent(words, logs=(xid,))))


def test_analyze_says_its_guess_is_one(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("epoch 3: loading shard 120\nFatal: the worker process was lost, signal\n")
    doc = json.loads(run_cli("analyze", str(log), "--json").stdout)
    assert (doc["verdict"]["hang_class"], doc["verdict"]["confidence"]) == ("rank_loss", "low")
    assert "a guess from words" in doc["verdict"]["summary"]
    assert [e["source"] for e in doc["evidence"]] == ["word-model"]


def test_an_excerpt_gives_every_telling_line_and_a_big_log_only_the_gated_ones(
    tmp_path: Path,
) -> None:
    from doctor.logs.parse import Bounds

    log = tmp_path / "job.log"
    log.write_text("the worker was killed while loading\nstep 1 loss 0.3\n")
    # GIVEN a line no parser's gate passes, with words that tell (killed, loading)
    # WHEN it is read as an excerpt, then as if it were a big log
    small, big = read_logs([log]), read_logs([log], Bounds(word_bytes=0))
    # THEN the excerpt keeps its words, the big log does not scan for them (reading speed)
    assert {"killed", "worker", "loading"} <= set(small.words)
    assert "step" not in small.words  # a line with no telling word gives none
    assert big.words == ()


def test_an_issue_template_s_structure_gives_no_words(tmp_path: Path) -> None:
    # GIVEN a log pasted into an issue's template: headings, a details tag, a code fence
    log = "[rank1]: torch.distributed.DistBackendError: NCCL error: unhandled system error"
    page = tmp_path / "issue.md"
    page.write_text(
        "### Describe the bug\n<details><summary>Full traceback</summary>\n\n```shell\n"
        f"{log}\n```\n</details>\n\n### Environment\n"
    )
    alone = tmp_path / "log.txt"
    alone.write_text(log + "\n")
    # WHEN read THEN its words are the log's alone
    assert read_logs([page]).words == read_logs([alone]).words
    assert not {"describe", "details", "summary", "shell", "environment"} & set(
        read_logs([page]).words
    )


def test_an_environment_report_and_the_user_s_own_sentences_give_no_words(
    tmp_path: Path,
) -> None:
    # GIVEN a log pasted with torch's collect_env report, a template's version bullets and
    # the user's own sentences around it (42 of 408 right dev verdicts changed when a
    # collect_env report was appended to each case before these lines gave no words)
    log = "[rank1]: torch.distributed.DistBackendError: NCCL error: unhandled system error"
    page = tmp_path / "issue.md"
    page.write_text(
        "Hi, my job hangs after a few steps, see the log below.\n"
        f"{log}\n"
        "Any idea what is wrong? Thanks\n"
        "- PyTorch 2.4, CUDA 12.4, 8x H100\n"
        "Collecting environment information...\n"
        "PyTorch version: 2.1.0+cu121\n"
        "CUDA used to build PyTorch: 12.1\n"
        "OS: Ubuntu 22.04.3 LTS (x86_64)\n"
        "Is CUDA available: True\n"
        "GPU models and configuration:\n"
        "GPU 0: NVIDIA A100-SXM4-80GB\n"
        "Nvidia driver version: 535.104.05\n"
        "[pip3] torch==2.1.0\n"
    )
    alone = tmp_path / "log.txt"
    alone.write_text(log + "\n")
    # WHEN read THEN its words are the log's alone
    assert read_logs([page]).words == read_logs([alone]).words
    # AND a log's own lines that start alike still give theirs
    kept = tmp_path / "kept.log"
    kept.write_text(
        "OSError: [Errno 28] No space left on device\nGPU 0: fell off the bus\n"
        "I/O error, dev nvme0n1, sector 0 op 0x1:(WRITE)\n"
    )
    assert {"oserror", "space", "fell", "bus", "dev", "sector"} <= set(read_logs([kept]).words)


def test_a_silent_hang_whose_words_tell_nothing_is_the_commonest_unread_class() -> None:
    shipped = json.loads(SHIPPED.read_text())["fallback"]
    # GIVEN logs alone that no rule reads, with words the model does not know
    [guessed] = log_rules.candidates(_silent(("zzqxw", "vvkpt")))
    # THEN the fallback class (the commonest among the training cases no rule read), low,
    # saying how often it was that class and that it is a guess
    assert guessed.hang_class.value == shipped["class"] == model().fallback.value  # type: ignore[union-attr]
    assert guessed.confidence is Confidence.LOW and guessed.rule == "log_silent+fallback"
    assert f"{shipped['cases']} of {shipped['of']}" in guessed.summary
    assert "a guess from how often" in guessed.summary
    # AND logs without a word stay unknown: nothing to guess from
    [empty] = log_rules.candidates(_silent(()))
    assert empty.hang_class is HangClass.UNKNOWN
    # AND so do logs where a rank raised its own error (not a silent hang)
    raised = LogEvent(1, "exception", "[rank1]: KeyError: 'labels'")
    [loud] = log_rules.candidates(_silent(("zzqxw",), logs=(raised,)))
    assert loud.hang_class is HangClass.UNKNOWN and "+fallback" not in loud.rule
