"""Every reader is total: any text (cut, shuffled, binary) parses without raising."""

from __future__ import annotations

import random
from pathlib import Path

from doctor.evidence import Evidence
from doctor.logs import parse_text
from doctor.verdict.classify import classify

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def corpus_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(REAL.glob("*/*")):
        if path.name != "case.toml":
            lines.extend(path.read_text(errors="replace").splitlines())
    return lines


def test_mangled_corpus_text_never_raises() -> None:
    # GIVEN every line of the real corpus, cut, spliced and shuffled with a fixed seed
    rng = random.Random(13)
    lines = corpus_lines()
    for _ in range(60):
        sample = rng.sample(lines, min(len(lines), 80))
        mangled = []
        for line in sample:
            cut = rng.randrange(len(line) + 1)
            choice = rng.random()
            if choice < 0.3:
                line = line[:cut]
            elif choice < 0.5:
                line = line[:cut] + rng.choice(lines)[cut:]
            elif choice < 0.6:
                line = "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(40)))
            mangled.append(line)
        # WHEN it is parsed and judged THEN nothing raises
        parsed = parse_text(mangled, "mangled")
        stacks = ()
        classify(Evidence("x", None, logs=tuple(parsed.events), stacks=stacks))


def test_structures_that_never_close_are_bounded() -> None:
    # An unclosed JSON document, a traceback without its exception, a RAS header alone
    text = ["{", '  "communicators": ['] + ['    {"x": 1},'] * 10_000
    text += ["Traceback (most recent call last):"] + ['  File "a.py", line 1, in f'] * 5_000
    text += ["Job summary", "Errors", "DEAD"]
    parsed = parse_text(text, "open")
    assert parsed.lines == len(text)


def test_the_gate_that_skips_lines_loses_nothing_on_real_text(monkeypatch) -> None:
    # GIVEN every corpus text and recorded log, parsed with the gate and without it
    from doctor.logs import parse

    texts = [p for p in sorted(REAL.glob("*/*")) if p.name != "case.toml"]
    texts += sorted((REAL.parents[1] / "triage" / "data" / "logs").glob("*"))
    gated = [parse_text(p.read_text(errors="replace").splitlines(), p.name).events for p in texts]
    monkeypatch.setattr(parse, "worth_a_look", lambda raw: True)
    every = [parse_text(p.read_text(errors="replace").splitlines(), p.name).events for p in texts]
    # THEN the events are the same: the gate only skips lines no parser reads
    assert gated == every


def test_the_gate_skips_a_plain_training_line() -> None:
    # GIVEN a training line that says nothing a parser reads WHEN gated THEN it is skipped
    # (an empty word in the gate's list would let every line through, at a tenth the speed)
    from doctor.logs.parse import worth_a_look

    assert not worth_a_look("[default3]:step 123456 | loss 2.71828 | lr 3.0e-04 | grad 0.98")
    assert worth_a_look(" 35%|████████ | 7381/20814 [30:01<57:14, 39.81")
