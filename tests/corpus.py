"""The labelled corpora of real logs: load the cases, judge each with the same path
``nccl-doctor analyze`` takes, score the verdicts per class.

``tests/fixtures/real/`` is the in-sample corpus (the rules were written with it in view);
``tests/fixtures/heldout/`` is the held-out one, split by source repository into ``dev``
(rules may be written from it) and ``test`` (never looked at for rules), see ``split_of``.

Used by ``benchmarks/bench_logs.py`` (the tables in docs/logs.md) and by
``tests/logs/test_corpus_accuracy.py`` (the accuracy floors).
"""

from __future__ import annotations

import hashlib
import tomllib
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from doctor.model import HangClass, Verdict

CORPUS = Path(__file__).parent / "fixtures" / "real"
HELDOUT = Path(__file__).parent / "fixtures" / "heldout"


RENAMED = {
    "Lightning-AI/lightning": "Lightning-AI/pytorch-lightning",
    "PyTorchLightning/pytorch-lightning": "Lightning-AI/pytorch-lightning",
    "microsoft/DeepSpeed": "deepspeedai/DeepSpeed",
    "microsoft/DeepSpeedExamples": "deepspeedai/DeepSpeedExamples",
    "hiyouga/LLaMA-Factory": "hiyouga/LlamaFactory",
    "google/jax": "jax-ml/jax",
    "volcengine/verl": "verl-project/verl",
    "NVIDIA/NeMo": "NVIDIA-NeMo/Speech",
    "ROCmSoftwarePlatform/tensorflow-upstream": "ROCm/tensorflow-upstream",
    "aws-samples/awsome-distributed-training": "awslabs/awsome-distributed-ai",
    "awslabs/awsome-distributed-training": "awslabs/awsome-distributed-ai",
}
"""Projects known under two names (a renamed owner or repository), whose names hash to
different splits: the corpus records each under the second name only, so one project never
sits on both sides (``tests/logs/test_corpus_accuracy.py`` checks it)."""


def split_of(repository: str) -> str:
    """The held-out split a case's source repository (or site) falls in, fixed before any
    rule was written for these cases: the first hex digit of the name's SHA-256, 0-7 dev,
    8-f test. Every case of a repository lands on the same side, so a rule tuned on one
    thread of a project cannot be scored on its sibling."""
    return "dev" if hashlib.sha256(repository.encode()).hexdigest()[0] in "01234567" else "test"


@dataclass(frozen=True)
class Case:
    name: str
    folder: Path
    hang_class: HangClass
    culprit_ranks: tuple[int, ...]
    files: tuple[Path, ...]
    repository: str = ""
    split: str = ""
    """``dev`` or ``test`` for a held-out case; empty for the in-sample corpus."""
    source: str = ""
    """The thread's URL (``case.toml``'s ``source``)."""


@dataclass(frozen=True)
class Outcome:
    case: Case
    verdict: Verdict | None
    error: str = ""
    """The exception text when judging the case crashed."""

    @property
    def class_right(self) -> bool:
        return self.verdict is not None and self.verdict.hang_class is self.case.hang_class

    @property
    def culprits_right(self) -> bool | None:
        """None when the thread names no culprit (nothing to score)."""
        if not self.case.culprit_ranks:
            return None
        return self.verdict is not None and set(self.verdict.culprit_ranks) == set(
            self.case.culprit_ranks
        )


def cases(root: Path = CORPUS, split: str | None = None) -> list[Case]:
    """The cases under ``root``; with ``split``, only that held-out split's."""
    found = []
    for meta in sorted(root.glob("*/case.toml")):
        doc = tomllib.loads(meta.read_text())
        case = Case(
            meta.parent.name,
            meta.parent,
            HangClass(doc["hang_class"]),
            tuple(doc.get("culprit_ranks", ())),
            tuple(meta.parent / f for f in doc["files"]),
            doc.get("repository", ""),
            doc.get("split", ""),
            doc["source"],
        )
        if split is None or case.split == split:
            found.append(case)
    return found


def judge(case: Case, words: bool = True) -> Outcome:
    """The verdict ``nccl-doctor analyze FILES...`` reaches on the case's files (without
    ``words``: the rules' alone, the word model given nothing)."""
    from doctor.analyze.load import load_evidence
    from doctor.verdict.classify import classify

    try:
        evidence = load_evidence(list(case.files))
        if not words:
            evidence = replace(evidence, log_words=())
        return Outcome(case, classify(evidence))
    except Exception as exc:  # a crash is a finding of the benchmark, not its end
        return Outcome(case, None, f"{type(exc).__name__}: {exc}")


@dataclass
class Score:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return sum(o.class_right for o in self.outcomes) / max(1, len(self.outcomes))

    def per_class(self) -> list[tuple[str, int, int, float, float, str]]:
        """(class, cases, predicted, precision, recall, culprits right/scored) per class."""
        truth = Counter(o.case.hang_class for o in self.outcomes)
        predicted = Counter(o.verdict.hang_class for o in self.outcomes if o.verdict)
        right = Counter(o.case.hang_class for o in self.outcomes if o.class_right)
        rows = []
        for cls in HangClass:
            if not truth[cls] and not predicted[cls]:
                continue
            scored = [
                o
                for o in self.outcomes
                if o.case.hang_class is cls and o.culprits_right is not None
            ]
            culprits = f"{sum(bool(o.culprits_right) for o in scored)}/{len(scored)}"
            rows.append(
                (
                    cls.value,
                    truth[cls],
                    predicted[cls],
                    right[cls] / predicted[cls] if predicted[cls] else float("nan"),
                    right[cls] / truth[cls] if truth[cls] else float("nan"),
                    culprits,
                )
            )
        return rows


def score(root: Path = CORPUS, split: str | None = None) -> Score:
    return Score([judge(c) for c in cases(root, split)])
