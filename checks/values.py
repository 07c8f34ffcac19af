"""How NCCL and PyTorch really parse a value, so we can say what a typo turns into.

NCCL reads integer parameters with ``strtoll(str, NULL, 0)`` and never checks
the end pointer: ``16k`` becomes 16, ``true`` becomes 0 (so
``NCCL_IB_DISABLE=true`` leaves IB on) and ``010`` is octal 8. PyTorch's
boolean parser accepts ``y/yes/t/true/1`` and ``n/no/f/false/0`` and raises on
anything else. ``check_value`` turns a catalogue spec and a value into a
``Problem`` with a corrected value, or ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from doctor.checks.catalogue import VarSpec
from doctor.jobconfig.durations import parse_duration
from doctor.torchjob.torchenv import MAX_DIGITS, TORCH_FALSE, TORCH_TRUE, decimal

NCCL_STRBOOL = frozenset({"1", "0", "t", "f", "true", "false"})
_TRUTHY_WORDS = TORCH_TRUE | {"on", "enable", "enabled"}
_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class Strtoll:
    """What C ``strtoll(s, NULL, 0)`` returns for ``s``."""

    value: int
    rest: str
    """The unparsed tail that NCCL silently ignores."""
    base: int
    overflow: bool = False


@dataclass(frozen=True)
class Problem:
    """Why a value is not what its author meant, and a value that is."""

    message: str
    fixed: str | None = None
    """A corrected value; None when only removing the variable fixes it."""
    severe: bool = True
    """A fail: the value does something else than meant; False (a warn) when it is only untidy."""


def strtoll(text: str) -> Strtoll:
    """Emulate glibc ``strtoll`` with base 0: whitespace, sign, ``0x`` hex, leading-0 octal."""
    s = text.lstrip(" \t\n\r\f\v")
    sign, body = (-1, s[1:]) if s[:1] == "-" else (1, s[1:] if s[:1] == "+" else s)
    if body[:2].lower() == "0x" and body[2:3] and body[2:3] in "0123456789abcdefABCDEF":
        base, digits_at, pattern = 16, 2, r"[0-9a-fA-F]*"
    elif body[:1] == "0":
        base, digits_at, pattern = 8, 0, r"[0-7]*"
    else:
        base, digits_at, pattern = 10, 0, r"[0-9]*"
    match = re.match(pattern, body[digits_at:])
    digits = match.group(0) if match else ""
    if not digits:
        return Strtoll(0, text, base)
    rest = body[digits_at + len(digits) :]
    significant = digits.lstrip("0")
    if len(significant) > MAX_DIGITS:  # far outside int64: clamp without converting
        return Strtoll(_INT64[1] if sign > 0 else _INT64[0], rest, base, overflow=True)
    value = sign * int(significant or "0", base)
    if not _INT64[0] <= value <= _INT64[1]:
        return Strtoll(max(min(value, _INT64[1]), _INT64[0]), rest, base, overflow=True)
    return Strtoll(value, rest, base)


def _numbers_in(text: str) -> set[int]:
    """Integers named in a parenthesis: ``(-2 auto)`` -> {-2}, ``(or legacy 0-5)`` -> {0..5}."""
    numbers: set[int] = set()
    for low, high in re.findall(r"(?<![\w.])(\d+)-(\d+)(?![\w.])", text):
        numbers |= set(range(int(low), int(high) + 1))
    text = re.sub(r"(?<![\w.])\d+-\d+(?![\w.])", " ", text)
    return numbers | {int(n) for n in re.findall(r"(?<![\w.])-?\d+(?![\w.])", text)}


@dataclass(frozen=True)
class _Rule:
    """The allowed set of one variable, read from the catalogue's free text."""

    ints: frozenset[int] = frozenset()
    low: int | None = None
    high: int | None = None
    words: frozenset[str] = frozenset()

    def allows_int(self, value: int) -> bool:
        if value in self.ints:
            return True
        if self.low is None and self.high is None:
            return not self.ints
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@cache
def _rule(spec: VarSpec) -> _Rule | None:
    """Parse ``1-128``, ``>=1 (-2 auto)``, ``0|1|2``, ``LOC|PIX (or legacy 0-5)``; None = free."""
    text = spec.allowed
    if not text or any(w in text for w in ("...", "combinable", "other values mean")):
        return None
    extras = set().union(*(_numbers_in(p) for p in re.findall(r"\(([^)]*)\)", text)))
    head = re.sub(r"\([^)]*\)", "", text).strip()
    if head.startswith(("y|yes", "c10 check_env")):
        return None  # torch booleans: handled by the bool dialect
    rng = re.match(r"^(-?\d+)-(\d+)\b", head)
    if rng:
        return _Rule(frozenset(extras), int(rng.group(1)), int(rng.group(2)))
    low = re.match(r"^(>=?)\s*(-?\d+)", head) or re.match(r"^(-?\d+)\.\.", head)
    if low:
        bound = int(low.group(2)) if low.group(1).startswith(">") else int(low.group(1))
        return _Rule(frozenset(extras), bound + (low.group(1) == ">"), None)
    if "|" not in head:
        return None
    legacy = re.search(r"(?:legacy\s+|or\s+)(\d+)-(\d+)", head)
    ints = set(extras)
    if legacy:
        ints |= set(range(int(legacy.group(1)), int(legacy.group(2)) + 1))
        head = head[: legacy.start()]
    words: set[str] = set()
    for token in head.replace(" or ", "|").split("|"):
        first = token.strip().split(" ")[0] if token.strip() else ""
        if re.fullmatch(r"-?\d+", first):
            ints.add(int(first))
        elif first:
            words.add(first.lower())
    return _Rule(frozenset(ints), None, None, frozenset(words))


def check_value(spec: VarSpec, value: str) -> Problem | None:
    """What is wrong with ``spec.name=value``, judged the way its reader parses it."""
    kind, allowed = spec.type, spec.allowed
    if kind == "bool" and allowed.startswith(("y|yes", "c10 check_env")):
        return _torch_bool(spec, value)
    if kind == "bool" and allowed.startswith("1|0|T|F"):
        if value.strip().lower() in NCCL_STRBOOL:
            return None
        return Problem(f"{_short(value)} is not one of 1, 0, true, false", _bool_fix(value))
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return Problem(f"{_short(value)} is not a number of seconds")
        return None
    if kind == "int" or (kind in ("bool", "enum") and _is_numeric_enum(spec)):
        return _integer(spec, value)
    if kind == "enum":
        rule = _rule(spec)
        if (
            rule
            and rule.words
            and value.strip().lower() not in rule.words
            and decimal(value) not in rule.ints
        ):
            options = "|".join(sorted(rule.words | {str(i) for i in rule.ints}))
            return Problem(f"{_short(value)} is not one of {options}; it is ignored")
    if kind == "list" and spec.name in ("NCCL_PROTO", "NCCL_ALGO", "NCCL_DEBUG_SUBSYS"):
        return _token_list(spec, value)
    return None


def _is_numeric_enum(spec: VarSpec) -> bool:
    rule = _rule(spec)
    return rule is not None and bool(rule.ints) and not rule.words


def _torch_bool(spec: VarSpec, value: str) -> Problem | None:
    if value.strip().lower() in TORCH_TRUE | TORCH_FALSE:
        return None
    return Problem(
        f"{_short(value)} is not a boolean PyTorch accepts (1/0, true/false, yes/no): "
        "process-group creation raises",
        _bool_fix(value),
    )


def _bool_fix(value: str) -> str:
    return "1" if value.strip().lower() in _TRUTHY_WORDS else "0"


def _integer(spec: VarSpec, value: str) -> Problem | None:
    parsed = strtoll(value)
    rule = _rule(spec)
    if not spec.nccl_parsed:
        plain = decimal(value)
        if plain is None:
            return Problem(f"{_short(value)} is not an integer", _int_fix(spec, value, parsed))
        number = plain
    else:
        problem = _strtoll_problem(spec, value, parsed)
        if problem:
            return problem
        number = parsed.value
    if spec.type == "bool" and number not in (0, 1):
        return Problem(
            f"{_short(value)} is not 0 or 1 (NCCL treats any non-zero value as 1)",
            "1",
            severe=False,
        )
    if rule and not rule.allows_int(number):
        return Problem(f"{number} is outside the allowed values ({spec.allowed})")
    return None


def _strtoll_problem(spec: VarSpec, value: str, parsed: Strtoll) -> Problem | None:
    if parsed.overflow:
        return Problem(
            f"{_short(value)} overflows a 64-bit integer: NCCL falls back to the default "
            f"({spec.default})"
        )
    if parsed.rest == value:
        return Problem(
            f"NCCL parses {_short(value)} as 0 (strtoll finds no digits), so {spec.name} is 0",
            _int_fix(spec, value, parsed),
        )
    if parsed.rest.strip():
        return Problem(
            f"NCCL parses {_short(value)} as {parsed.value} and silently ignores "
            f"{_short(parsed.rest)}",
            _int_fix(spec, value, parsed),
        )
    if parsed.base == 8 and len(value.strip().lstrip("+-")) > 1:
        return Problem(
            f"NCCL parses {_short(value)} as octal {parsed.value}", value.strip().lstrip("0") or "0"
        )
    return None


def _int_fix(spec: VarSpec, value: str, parsed: Strtoll) -> str | None:
    """``16k`` bytes -> 16384, ``10m`` seconds -> 600, ``true`` -> 1; None when unsure."""
    unit = spec.allowed.split(" ")[0]
    suffix = re.fullmatch(r"\s*(\d{1,20})\s*([kmg])i?b?\s*", value.lower())
    if suffix and unit == "bytes":
        return str(int(suffix.group(1)) * _SUFFIX[suffix.group(2)])
    if unit in ("seconds", "ms", "milliseconds"):
        try:
            seconds = parse_duration(value)
        except ValueError:
            return None
        return str(round(seconds * (1 if unit == "seconds" else 1000)))
    word = value.strip().lower()
    if word in _TRUTHY_WORDS:
        return "1"
    return "0" if word in TORCH_FALSE | {"off", "disable", "disabled"} else None


def _short(value: str) -> str:
    """A value for a message: its repr, cut to 60 characters (a 128 KB value stays one line)."""
    return repr(value) if len(value) <= 60 else f"{value[:40]!r}... ({len(value)} characters)"


def _token_list(spec: VarSpec, value: str) -> Problem | None:
    """``NCCL_PROTO=LL,LL128,Simple``-style lists; per-collective ``op:list;...`` forms pass."""
    if ":" in value or ";" in value:
        return None
    head = spec.allowed.split("(")[0]
    known = {t.strip().lower() for t in head.split(",") if t.strip()}
    tokens = [t.strip().lower() for t in value.lstrip("^").split(",") if t.strip()]
    bad = [t for t in tokens if t not in known]
    if bad:
        return Problem(f"{', '.join(bad)} not in {head.strip()}; NCCL ignores unknown entries")
    return None
