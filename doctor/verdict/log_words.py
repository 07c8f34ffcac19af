"""The word model: for logs that are all there is and that no rule understood, which class
of the corpus's cases their words resemble.

``data/word_model.json`` is made by ``tools/train_word_model.py`` from the cases rules may be
written from (the in-sample corpus and the held-out corpus's dev split, never its test
split), with only the words found in cases of two repositories or more, so no word stands
for one thread. It is a multinomial naive Bayes over the distinct words of the logs' telling
lines, with equal priors (the corpus's mix of classes is not a user's). Its answer refines an
``unknown`` log candidate into a low-confidence guess that says it is one and shows the words
it rests on; it never says ``healthy`` or ``unsupported_op`` (a refusal the rules read in
its own words), and it abstains below ``MIN_POSTERIOR`` and on logs that hold fewer than
``MIN_WORDS`` of its words (``hello, my job hangs`` guessed ``rank_loss`` from ``job``).

Where it abstains on logs that hold words and in which no rank raised, crashed or exited,
the guess is the model's ``fallback``: the class most common among the training cases
whose logs no rule read. Those are hangs that printed no failure (a crash, a transport or
GPU fault and a set-up error each print one), and a silent hang's likeliest cause is what
such hangs mostly were. Logs without a word, or with a rank's own error no rule placed,
stay ``unknown``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from doctor.model import Confidence, EvidenceLine, HangClass
from doctor.verdict.candidate import Candidate

MIN_POSTERIOR = 0.4
"""Below this the words do not tell one class from another (see the tool's --check)."""
MIN_WORDS = 2
"""A guess from words rests on at least this many words of the model: one word (``job``) is
any text's, a user's sentence as much as a log's."""
SHOWN = 6
"""Words of the evidence line: those that favour the guessed class most."""
SOURCE = "word-model"
"""The ``source`` of the evidence line a guess adds."""


@dataclass(frozen=True)
class WordModel:
    logp: dict[str, dict[str, float]]
    """Class -> word -> log P(word | class)."""
    fallback: HangClass | None = None
    """The class most common among the training cases no rule read."""
    fallback_share: tuple[int, int] = (0, 0)
    """(cases of ``fallback``, cases) among those."""

    @classmethod
    def of(cls, doc: dict[str, object]) -> WordModel:
        """The model from its JSON (``tools/train_word_model.py`` writes it)."""
        alpha = float(doc["alpha"])  # type: ignore[arg-type]
        counts: dict[str, dict[str, int]] = doc["classes"]  # type: ignore[assignment]
        vocab = set().union(*counts.values())
        logp = {}
        for name, words in counts.items():
            total = sum(words.values()) + alpha * len(vocab)
            logp[name] = {w: math.log((words.get(w, 0) + alpha) / total) for w in vocab}
        fallback: dict[str, str | int] = doc.get("fallback") or {}  # type: ignore[assignment]
        if not fallback:
            return cls(logp)
        share = (int(fallback["cases"]), int(fallback["of"]))
        return cls(logp, HangClass(str(fallback["class"])), share)

    def known(self, words: Iterable[str]) -> list[str]:
        """The words of the model among ``words``, sorted."""
        return sorted(set(words) & next(iter(self.logp.values())).keys())

    def guess(self, words: Iterable[str], threshold: float = MIN_POSTERIOR) -> Guess | None:
        """The class ``words`` resemble most, or None when they hold fewer than ``MIN_WORDS``
        words of the model, no class reaches ``threshold``, or no word favours the best class
        over the others."""
        known = self.known(words)
        if len(known) < MIN_WORDS:
            return None
        scores = {c: sum(p[w] for w in known) for c, p in self.logp.items()}
        best = max(scores, key=lambda c: (scores[c], c))
        top = scores[best]
        posterior = 1 / sum(math.exp(s - top) for s in scores.values())
        if posterior < threshold:
            return None
        rivals = [p for c, p in self.logp.items() if c != best]
        lift = {w: self.logp[best][w] - max(r[w] for r in rivals) for w in known}
        telling = sorted((w for w in known if lift[w] > 0), key=lambda w: (-lift[w], w))
        if not telling:  # a tie: no word of the logs favours the class
            return None
        return Guess(HangClass(best), posterior, tuple(telling[:SHOWN]))


@dataclass(frozen=True)
class Guess:
    hang_class: HangClass
    posterior: float
    words: tuple[str, ...]
    """The words that favour the class most, most first."""


@cache
def model() -> WordModel:
    text = resources.files("doctor.data").joinpath("word_model.json").read_text()
    return WordModel.of(json.loads(text))


def refine(
    candidates: list[Candidate], words: Iterable[str], *, silent: bool = False
) -> list[Candidate]:
    """``candidates`` (``unknown`` ones from logs alone) as the class the logs' words
    resemble, at low confidence. Where the model abstains: the fallback class when the logs
    are ``silent`` (no rank raised, crashed or exited) yet hold words, else unchanged."""
    words = tuple(words)
    guess = model().guess(words)
    if guess is None:
        return _fallen_back(candidates) if words and silent else candidates
    said = ", ".join(guess.words)
    cls = guess.hang_class.value
    return _as_guess(
        candidates,
        guess.hang_class,
        f"The words of its lines resemble the corpus's {cls} cases ({guess.posterior:.0%}; "
        f"{said}): a guess from words, not a finding",
        EvidenceLine(SOURCE, None, f"{cls} {guess.posterior:.0%}: {said}"),
        "words",
    )


def _fallen_back(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` as the model's fallback class, at low confidence, saying why."""
    words_model = model()
    fallback, (among, of) = words_model.fallback, words_model.fallback_share
    if fallback is None:
        return candidates
    cls = fallback.value
    return _as_guess(
        candidates,
        fallback,
        f"Their words tell no class either; of the corpus's hangs whose logs no rule read, "
        f"the most were {cls} ({among} of {of}): a guess from how often, not a finding",
        EvidenceLine(SOURCE, None, f"{cls}: {among} of {of} hangs no rule read"),
        "fallback",
    )


def _as_guess(
    candidates: list[Candidate], hang_class: HangClass, why: str, line: EvidenceLine, tag: str
) -> list[Candidate]:
    """``candidates`` as ``hang_class``, at low confidence: ``why`` ends each summary, ``line``
    joins its evidence, ``tag`` its rule."""
    return [
        replace(
            c,
            hang_class=hang_class,
            confidence=Confidence.LOW,
            summary=f"{c.summary}. {why}",
            evidence=c.evidence + (line,),
            rule=f"{c.rule}+{tag}",
        )
        for c in candidates
    ]
