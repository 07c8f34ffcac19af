"""Write ``doctor/data/messages.json``: the error messages NCCL, RCCL, AWS's NCCL network
plugin and torchelastic print, read from their sources, each with the hang class its place
in the source points to.

Facts only: each entry is a message's format string (as a list of literal fragments; a
``%`` conversion or an f-string field is a gap between them), the file and line it is
raised at, and the class that file's job gives it. No source code is copied.

* NCCL: every ``WARN("...")`` call, from a git mirror of NVIDIA/nccl (``git show``), at the
  newest release and at older ones (``OLDER_RELEASES``): users paste logs of the NCCL their
  container shipped, and messages are reworded or dropped between releases. A message
  found in several releases is recorded once, at its newest place. ``INFO`` calls are left
  out: NCCL prints them and goes on (``Failed to initialize NET plugin IB`` on a host
  without InfiniBand is how every healthy socket job starts).
* RCCL (AMD's fork: the same tree, the same ``WARN``) and aws-ofi-nccl (the network plugin
  of AWS's EFA clusters: ``NCCL_OFI_WARN``, printed in NCCL's log as ``NCCL WARN NET/OFI``),
  each at its newest commit, with the messages NCCL does not print.
* PyTorch: the messages torchelastic's agent, its process launcher and its rendezvous
  raise or log as errors (``raise X(...)``, ``logger.error/exception(...)``), from the
  installed torch's own Python files (parsed with ``ast``).
* The Python frameworks a job runs through (torch.distributed beyond torchelastic,
  Lightning, accelerate, DeepSpeed, Horovod, Megatron, NeMo, Transformer Engine, NVIDIA's
  resiliency extension, JAX, torchtitan, torchft, verl, LlamaFactory): only the places
  ``framework_places.tsv`` lists, each judged by a person reading that place in the source
  (a framework's files mix set-up, checks and refusals, so no file prefix gives a class).
  The message is the ``raise``, ``assert`` or logging call read there, from the installed
  torch or a git mirror of the project at its HEAD; the example line beside each place must
  match what is read, or the place is reported and left out (the source moved).

Only messages that say something failed are kept (a warning that names a fallback or a
default is not a failure). The class of a message is the class of the file it is raised in
(``NCCL_CLASSES``, ``OFI_CLASSES``, ``TORCH_CLASSES``, first matching prefix wins; a file no
prefix names is left out), except that a message saying the other end closed the connection
or exited points to a lost rank, NCCL's own collective-mismatch checks to a mismatch, and a
data type or reduction NCCL cannot do to a backend's refusal (``unsupported_op``).

    .venv/bin/python tools/gen_message_catalogue.py NCCL_MIRROR [COMMIT...] \
        [--rccl RCCL_MIRROR] [--ofi OFI_MIRROR] [--frameworks MIRRORS]

Each MIRROR is a git mirror of its project; without COMMITs: NCCL's HEAD, then
``OLDER_RELEASES``. MIRRORS holds one git mirror per framework, ``OWNER+NAME/repo``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NCCL_CLASSES: tuple[tuple[str, str], ...] = (
    ("src/ras/", ""),  # RAS has its own reader
    ("src/os/windows", ""),
    ("src/include/checks.h", ""),  # CUDA/syscall wrappers: read by doctor.logs.cuda and others
    ("src/transport/net_ib/init.cc", "bootstrap"),  # opening the NICs while NCCL starts
    ("src/transport/net_ib", "network"),
    ("src/transport/net_socket", "network"),
    ("src/transport/net.cc", "network"),
    ("src/transport/coll_net", "network"),
    ("src/transport/generic", "network"),
    ("src/proxy.cc", "network"),
    ("src/misc/ibvwrap", "network"),
    ("src/misc/mlx5dvwrap", "network"),
    ("src/misc/gdrwrap", "network"),
    ("src/gin/", "network"),
    ("src/rma/", "network"),
    ("src/plugin/net", "bootstrap"),  # a network plugin that cannot be loaded or started
    ("src/plugin/", "bootstrap"),
    ("src/bootstrap.cc", "bootstrap"),
    ("src/init", "bootstrap"),
    ("src/group.cc", "bootstrap"),
    ("src/channel.cc", "bootstrap"),
    ("src/transport.cc", "bootstrap"),
    ("src/transport/shm", "bootstrap"),
    ("src/transport/p2p", "bootstrap"),
    ("src/transport/nvls", "bootstrap"),
    ("src/misc/shmutils", "bootstrap"),
    ("src/misc/ipcsocket", "bootstrap"),
    ("src/os/linux", "bootstrap"),
    ("src/misc/socket", "bootstrap"),
    ("src/misc/argcheck", "bootstrap"),
    ("src/misc/cudawrap", "bootstrap"),
    ("src/misc/nvmlwrap", "bootstrap"),
    ("src/misc/utils", "bootstrap"),
    ("src/graph/", "bootstrap"),
    ("src/register/", "bootstrap"),
    ("src/mem_manager", "bootstrap"),
    ("src/dev_runtime", "bootstrap"),
    ("src/enqueue.cc", "bootstrap"),  # ncclInvalidUsage: arguments rejected at the call
    ("src/include/alloc.h", "bootstrap"),
)
"""Where in NCCL's tree a message is raised -> the hang class (README's class rules):
transports and the proxy carry data between connected ranks (network); everything that
builds a communicator, its shared memory, IPC handles, topology and plugins (bootstrap)."""

OFI_CLASSES: tuple[tuple[str, str], ...] = (
    ("src/nccl_ofi_rdma", "network"),
    ("src/nccl_ofi_sendrecv", "network"),
    ("src/rdma/", "network"),
    ("src/cm/", "network"),
)
"""aws-ofi-nccl: its two protocols and their connection manager carry the data (network). The
rest finds the fabric, its provider, NICs, topology and CUDA as NCCL starts, and fails on
every host without EFA, where NCCL goes on with its own transports (``NET/OFI OFI fi_getinfo()
call failed: No data available`` starts many a healthy job): left out, with the protocols'
own messages of that search (``OFI_PROBING``)."""
OFI_PROBING = re.compile(r"fi_getinfo|provider|initiali[sz]|protocol|platform", re.I)

TORCH_CLASSES: tuple[tuple[str, str], ...] = (
    ("distributed/elastic/rendezvous/", "bootstrap"),
    ("distributed/elastic/utils/store", "bootstrap"),
    ("distributed/rendezvous.py", "bootstrap"),
    ("distributed/elastic/agent/", "rank_loss"),
    ("distributed/elastic/multiprocessing/", "rank_loss"),
)
"""torchelastic: the rendezvous and its store set the job up (bootstrap); the agent and
its process launcher report workers that failed or exited (a lost rank)."""

OLDER_RELEASES = (
    "v2.27.7-1",
    "v2.24.3-1",
    "v2.21.5-1",
    "v2.18.6-1",
    "v2.15.5-1",
    "v2.12.12-1",
    "v2.10.3-1",
    "v2.8.4-1",
    "v2.7.8-1",
    "v2.4.8-1",
)
"""The last patch of a release every year or so back to 2.4 (2019), the oldest NCCL a public
log still shows; the files moved between them (``net_ib.cc`` became ``net_ib/``), and the
class table's prefixes match both layouts."""

_PEER_LEFT = re.compile(
    r"closed by (?:remote )?peer|reset by peer|remote process exit|peer .*?(?:exit|died)",
    re.IGNORECASE,
)
_FAILURE = re.compile(
    r"fail|error|fatal|timeout|timed out|abort|unable|cannot|could not|invalid|mismatch|not found|"
    r"no such|denied|refused|unreachable|exceed|too many|too small|out of|closed by|reset by|"
    r"not supported|unsupported|incompatible|\bno (?:\w+ ){0,3}(?:found|available)|no valid|"
    r"not available|no algorithm|without a matching|already checked in|using the same|"
    r"unexpected",
    re.I,
)
"""Words of a failure. Besides the plain ones: what a build, a device or the communicator's
ranks cannot do together (``not supported``, ``incompatible``, ``No IP interface found``,
``No algorithm/protocol available``, ``send to self without a matching recv``, a rank that
``has already checked in`` at the root, ``Multiple Ranks are using the same GPU``)."""
_BENIGN = re.compile(
    r"default|fall(?:ing)? ?back|trying (?:a |the )?(?:different|next|another|again)|ignor|"
    r"disabl|retrying|will use|instead|(?<!not )(?<!cannot )continu|setting \w+ to|"
    r"limiting to|not using it|non-fatal",
    re.I,
)
"""A warning that says what NCCL does instead (a fallback, a default, a value it clamps)
reports no failure; ``Cannot continue`` is the opposite of going on."""
_OPTIONAL_LIBRARY = re.compile(r"Failed to open|dlv?sym failed")
_OPTIONAL_LOADERS = ("src/misc/ibvwrap", "src/misc/gdrwrap", "src/misc/mlx5dvwrap")
"""NCCL loads libibverbs, gdrcopy and mlx5dv when a host has them and goes on without them
(older releases said so in a ``WARN``: ``Failed to open libibverbs.so[.1]`` starts many a
healthy socket-only job): not a failure."""
_MISMATCH = re.compile(
    r"collective mismatch|mismatched collective|without a matching|mismatch with rank", re.I
)
"""NCCL's own check that ranks called the same collective with the same size (the
``NCCL_CHECK_MISMATCH`` of 2.7-2.11, the IB size check, the symmetric-memory check of each
rank's registered buffers), and a send to itself that no receive of the same rank matches."""
_UNSUPPORTED = re.compile(
    r"invalid type|invalid reduction operation|No algorithm/protocol available|"
    r"not supported in this communicator|unsupported collective",
    re.I,
)
"""The call's data type, reduction or operation that this NCCL or communicator cannot do
(bfloat16 before 2.10, FP8 before 2.24 print ``invalid type``): a backend's refusal, not a
set-up failure."""
_CONVERSION = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[a-zA-Z%]")
_LITERAL = r'"((?:[^"\\\n]|\\.)*)"'


def _calls(macro_prefix: str) -> re.Pattern[str]:
    """``WARN("...")``/``INFO(mask, "...")`` calls, their names after ``macro_prefix``."""
    return re.compile(
        rf"(?<!\w){macro_prefix}(WARN|INFO)\(\s*(?:(NCCL_[A-Z_|\s]+),\s*)?"  # INFO's mask
        r"((?:" + _LITERAL + r"\s*(?:PRI\w+\s*)?)+)",
    )


_STRINGS = re.compile(_LITERAL + r"|\bPRI\w+")
MIN_LITERAL = 12
"""Fewer literal characters than this and a message (``%s``, ``%s:%d %s``) says nothing."""


def _unescape(text: str) -> str:
    return text.replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").replace("\\\\", "\\")


def fragments(fmt: str) -> list[str]:
    """A printf format -> its literal pieces, in order (conversions are the gaps)."""
    pieces = [p.strip() for p in _CONVERSION.split(fmt.replace("%%", "%"))]
    return [p for p in pieces if p]


def _class_of(path: str, table: tuple[tuple[str, str], ...]) -> str | None:
    return next((cls for prefix, cls in table if prefix in path), None)


def _entry(frags: list[str], cls: str, source: str, where: str) -> dict[str, object] | None:
    if sum(len(f) for f in frags) < MIN_LITERAL or not any(len(f) >= 6 for f in frags):
        return None
    text = " ".join(frags)
    if not _FAILURE.search(text) or _BENIGN.search(text):
        return None
    if where.startswith(_OPTIONAL_LOADERS) and _OPTIONAL_LIBRARY.search(text):
        return None
    if _PEER_LEFT.search(text):
        cls = "rank_loss"
    elif _MISMATCH.search(text):
        cls = "collective_mismatch"
    elif _UNSUPPORTED.search(text):
        cls = "unsupported_op"
    return {"fragments": frags, "class": cls, "source": source, "at": where}


@dataclass(frozen=True)
class CSource:
    """A C/C++ project whose log macro NCCL's log prints: NCCL itself, RCCL (AMD's fork, the
    same tree and macros) and AWS's network plugin (``NCCL_OFI_WARN``, printed as
    ``NCCL WARN NET/OFI ...``)."""

    name: str
    repository: str
    classes: tuple[tuple[str, str], ...]
    macro_prefix: str = ""
    probing: re.Pattern[str] | None = None
    """Messages of a start that fails harmlessly where the hardware is absent: left out."""


NCCL = CSource("nccl", "github.com/NVIDIA/nccl", NCCL_CLASSES)
RCCL = CSource("rccl", "github.com/ROCm/rccl", NCCL_CLASSES)
OFI = CSource("aws-ofi-nccl", "github.com/aws/aws-ofi-nccl", OFI_CLASSES, "NCCL_OFI_", OFI_PROBING)


def c_messages(source: CSource, mirror: str, commit: str) -> list[dict[str, object]]:
    out = []
    calls = _calls(source.macro_prefix)
    for path in _git(mirror, "ls-tree", "-r", "--name-only", commit, "src").split():
        cls = _class_of(path, source.classes)
        if not cls or not path.endswith((".cc", ".h", ".cu", ".cpp")):
            continue
        text = _git(mirror, "show", f"{commit}:{path}")
        for m in calls.finditer(text):
            level, body = m.group(1), m.group(3)
            if level == "INFO":  # the project's own judgement: informational, it goes on
                continue
            fmt = "".join(
                "%d" if s.group(0).startswith("PRI") else _unescape(s.group(1))
                for s in _STRINGS.finditer(body)
            )
            line = text.count("\n", 0, m.start()) + 1
            if source.probing and source.probing.search(fmt):
                continue
            if entry := _entry(fragments(fmt), cls, source.name, f"{path}:{line}"):
                out.append(entry)
    return out


def _fstring_fragments(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return fragments(node.value)
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts += fragments(value.value)
        return parts
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fstring_fragments(node.left), _fstring_fragments(node.right)
        return (left or []) + (right or []) if left or right else None
    return None


_LOG_CALLS = frozenset({"error", "exception", "critical"})
FRAMEWORK_PLACES = Path(__file__).with_name("framework_places.tsv")
_PRINTING = _LOG_CALLS | {"warning", "warn", "info", "fatal", "print"}
"""A listed place may print its message any way: the person who listed it judged it."""
_DRIFT = 3
"""How many lines a listed place's call may have moved since it was listed."""


def _message_of(node: ast.AST, calls: frozenset[str]) -> ast.expr | None:
    """The message ``node`` gives: ``raise X(msg)``, ``assert cond, msg``, or a call of one
    of ``calls`` (``logger.error(msg)``, ``print(msg)``); None for any other node."""
    if isinstance(node, ast.Assert):
        return node.msg
    call = node.exc if isinstance(node, ast.Raise) else node
    if not isinstance(call, ast.Call) or not call.args:
        return None
    name = getattr(call.func, "attr", getattr(call.func, "id", ""))
    return call.args[0] if isinstance(node, ast.Raise) or name in calls else None


def torch_messages(root: Path) -> list[dict[str, object]]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        cls = _class_of(rel, TORCH_CLASSES)
        if not cls:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert) or (message := _message_of(node, _LOG_CALLS)) is None:
                continue
            frags = _fstring_fragments(message)
            if frags and (entry := _entry(frags, cls, "torch", f"torch/{rel}:{node.lineno}")):
                out.append(entry)
    return out


def _message_near(tree: ast.AST, line: int) -> tuple[int, list[str]] | None:
    """The fragments of the ``raise``, ``assert`` or printing call nearest ``line``."""
    best: tuple[int, int, list[str]] | None = None
    for node in ast.walk(tree):
        if (message := _message_of(node, _PRINTING)) is None:
            continue
        first, last = node.lineno, node.end_lineno or node.lineno
        off = 0 if first <= line <= last else min(abs(first - line), abs(last - line))
        frags = _fstring_fragments(message)
        if off <= _DRIFT and frags and (best is None or off < best[0]):
            best = (off, first, frags)
    return (best[1], best[2]) if best else None


def framework_messages(
    mirrors: Path, places: Path = FRAMEWORK_PLACES
) -> tuple[list[dict[str, object]], dict[str, str]]:
    """The messages at ``places``, and the commit each framework's mirror was read at."""
    import torch

    from doctor.logs.catalogue import build

    torch_root = Path(torch.__file__).parents[1]
    out: list[dict[str, object]] = []
    commits: dict[str, str] = {}
    for row in places.read_text().splitlines():
        if row.startswith("#") or not row.strip():
            continue
        cls, repository, place, example = row.split("\t")
        path, line = place.rsplit(":", 1)
        if repository == "torch":
            text = (torch_root / path).read_text()
        else:
            mirror = str(mirrors / repository.replace("/", "+") / "repo")
            commits.setdefault(repository, _git(mirror, "rev-parse", "HEAD").strip())
            text = _git(mirror, "show", f"{commits[repository]}:{path}")
        found = _message_near(ast.parse(text), int(line))
        entry = {"fragments": found[1] if found else [], "class": cls, "source": repository}
        entry["at"] = f"{path}:{found[0]}" if found else place
        if not found or build({"messages": [entry]}).match(example.replace("\\n", " ")) is None:
            print(f"left out: {repository} {place} no longer prints {example[:60]!r}")
            continue
        out.append(entry)
    return out, commits


def _git(mirror: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", mirror, *args], check=True, capture_output=True, text=True
    ).stdout


def nccl_version(mirror: str, commit: str) -> str:
    """``2.30.7``: the release ``commit`` builds, from its ``makefiles/version.mk``."""
    version_mk = _git(mirror, "show", f"{commit}:makefiles/version.mk")
    return ".".join(
        re.search(rf"NCCL_{k}\s*:=\s*(\d+)", version_mk).group(1)  # type: ignore[union-attr]
        for k in ("MAJOR", "MINOR", "PATCH")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nccl", help="a git mirror of NVIDIA/nccl")
    parser.add_argument("commits", nargs="*", help="its commits (default: HEAD and releases)")
    parser.add_argument("--rccl", help="a git mirror of ROCm/rccl (its HEAD is read)")
    parser.add_argument("--ofi", help="a git mirror of aws/aws-ofi-nccl (its HEAD is read)")
    parser.add_argument("--frameworks", type=Path, help="a folder of OWNER+NAME/repo mirrors")
    args = parser.parse_args(argv)
    commits = [
        _git(args.nccl, "rev-parse", c).strip() for c in args.commits or ["HEAD", *OLDER_RELEASES]
    ]
    import torch  # the installed torch's own files are the PyTorch source read

    messages = [m for c in commits for m in c_messages(NCCL, args.nccl, c)]
    doc: dict[str, object] = {
        "about": "Error messages NCCL, its forks and plugins, torchelastic and the places "
        "tools/framework_places.tsv lists in the Python frameworks print, from their "
        "sources; written by tools/gen_message_catalogue.py, not by hand and not from any log "
        "case.",
        "nccl": {
            "repository": NCCL.repository,
            "commit": commits[0],
            "version": nccl_version(args.nccl, commits[0]),
            "older": [nccl_version(args.nccl, c) for c in commits[1:]],
        },
    }
    for source, mirror in ((RCCL, args.rccl), (OFI, args.ofi)):
        if mirror:
            head = _git(mirror, "rev-parse", "HEAD").strip()
            messages += c_messages(source, mirror, head)
            doc[source.name] = {"repository": source.repository, "commit": head}
    messages += torch_messages(Path(torch.__file__).parent / "distributed")
    if args.frameworks:
        listed, commits = framework_messages(args.frameworks)
        messages += listed
        doc["frameworks"] = {"read": FRAMEWORK_PLACES.name, "commits": commits}
    unique: dict[tuple[str, ...], dict[str, object]] = {}
    for m in messages:  # NCCL's newest release first: a message keeps its newest place
        unique.setdefault(tuple(m["fragments"]), m)  # type: ignore[arg-type]
    doc["torch"] = {"version": torch.__version__, "read": "torch/distributed (installed wheel)"}
    doc["messages"] = list(unique.values())
    target = Path(__file__).parents[1] / "doctor" / "data" / "messages.json"
    target.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
    print(f"{len(unique)} messages -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
