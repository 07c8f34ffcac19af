"""The words of a log's telling lines, kept for the word model (``doctor.verdict.log_words``).

A log no parser understands can still say what kind of failure it holds in the words it
shares with known cases (``interface``, ``libnccl``, ``oom``, ``ibv``...). The reader keeps
the distinct words of every line that passes its gate and, in a small file, of every line
``telling`` accepts (``Bounds.word_bytes``): a set, so a 2 GB log costs what its vocabulary
costs, bounded by ``MAX_WORDS`` against a hostile one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"[A-Za-z][A-Za-z_]{2,}")
LONGEST = 40
"""Longer runs of letters are identifiers or garbage, never a word of the model."""
MAX_WORDS = 5_000
"""Distinct words one reading keeps (a log's own vocabulary is a few hundred)."""


_TELLING = re.compile(
    r"(?i)error|fail|time[d ]?out|hang|hung|stuck|kill|abort|refuse|denied|unable|cannot|"
    r"can't|invalid|illegal|signal|exception|mismatch|unreachable|lost|died|dead|exit|"
    r"terminat|warn|fatal|oom|memory|nccl|cuda|gloo|rank|socket|connect|barrier|"
    r"watchdog|collective|allreduce|all_reduce|broadcast|gather"
)


_MARKUP = re.compile(
    r"^\s{0,3}(?:#{2,6}\s|```|~~~)|"
    r"^\s*</?(?:details|summary|pre|code|br|p|div|img|sub|sup|b|i)\b[^>]{0,200}>"
)
"""A Markdown heading or code fence, an HTML tag: the structure of an issue's template
(``### Environment``, ``<details><summary>log``), whose words are the same whatever failed.
One ``#`` is no heading here: nccl-tests prints its header that way."""


_ENVIRONMENT = re.compile(
    r"^\s*(?:[-*]\s+)?(?:Collecting environment information|PyTorch version|Is debug build|"
    r"(?:CUDA|ROCM) used to build PyTorch|OS(?=:)|GCC version|Clang version|CMake version|"
    r"Libc version|Python version|Python platform|Is CUDA available|CUDA runtime version|"
    r"CUDA_MODULE_LOADING set to|GPU models and configuration|Nvidia driver version|"
    r"cuDNN version|HIP runtime version|MIOpen runtime version|Is XNNPACK available|"
    r"Versions of relevant libraries)\b[^:\n]{0,20}:|"
    r"^\s*\[(?:pip3?|conda)\] |^\s*GPU \d{1,3}: (?:NVIDIA|Tesla|Quadro|AMD|Radeon)\b|"
    r"^\s*[-*]\s+(?:PyTorch|[Tt]orch|CUDA|NCCL|Python|cuDNN|[Dd]river|GPUs?|OS|transformers|"
    r"[Dd]eep[Ss]peed|vLLM|SGLang)\b[^\[\]=<>{}|]{0,120}\d"
)
"""A line of an environment report a user pastes beside the log (torch's ``collect_env``,
``pip list``, ``nvidia-smi -L``, an issue template's bullets: ``- PyTorch 2.4, CUDA 12.4``):
versions and device names, the same whatever failed."""


_PROSE = re.compile(
    r"^\s*(?:I(?=\s)|I'm|I've|I'd|My|We|We're|We've|Our|Hi|Hello|Thanks|Thank you|Here is|"
    r"Here are|Here's|Below is|Any idea|Has anyone|Does anyone|Can anyone|Could anyone|"
    r"How can|How do|Is there)\b[^\[\]=<>{}|]{0,300}$"
)
"""A user's own sentence around a pasted log (``My job hangs after a few steps, see the log
below.``): first person, a greeting or a question, none of a log's brackets or fields."""


_NOT_LOG = re.compile("|".join(p.pattern for p in (_MARKUP, _ENVIRONMENT, _PROSE)))
"""The three in one search: this runs for every line a reading keeps words of."""


def markup(line: str) -> bool:
    """Whether a line is a page's structure, an environment report or the user's own prose,
    not a log's (its words are kept out)."""
    return _NOT_LOG.search(line) is not None


def telling(line: str) -> bool:
    """Whether a line the parsers' gate passed over still holds words worth keeping."""
    return _TELLING.search(line) is not None


def words_in(text: str) -> set[str]:
    """The lowercase words (3 to ``LONGEST`` letters, underscores allowed) of ``text``."""
    return {w.lower() for w in _TOKEN.findall(text) if len(w) <= LONGEST}


def add_words(into: set[str], text: str) -> bool:
    """Add ``text``'s words to ``into`` while it holds fewer than ``MAX_WORDS``; False when
    the bound left some out."""
    if len(into) >= MAX_WORDS:
        return not words_in(text) - into
    into |= words_in(text)
    return True


def union(groups: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """The sorted distinct words of ``groups``, at most ``MAX_WORDS`` of them."""
    return tuple(sorted(set().union(*groups)))[:MAX_WORDS]
