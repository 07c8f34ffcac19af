"""Ranks' main-thread stacks merged into one prefix tree, as LLNL's STAT draws them.

Each node is a frame, outermost first; its ranks are every rank whose main
thread passed through it. Where one node has several children, or some of its
ranks stop there, the ranks diverge: that node is what a person reads first
(``divergence``). Ranks with equal stacks (one *class*, as the host documents
send them) are inserted once, with their rank set, so building the tree costs
classes x depth, and memory holds one list of class indices per node, never
ranks x frames.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from doctor.evidence import Frame, RankStack
from doctor.ranks import rank_noun, rank_ranges
from doctor.verdict.stacks import python_frames

MAX_JSON_NODES = 200
"""Nodes the JSON form prints (chains of one child count once); the rest are counted."""


@dataclass
class Node:
    frame: Frame | None
    """None for the root, above every outermost frame."""
    classes: list[int] = field(default_factory=list)
    children: dict[Frame, Node] = field(default_factory=dict)


@dataclass(frozen=True)
class StackTree:
    root: Node
    class_ranks: tuple[tuple[int, ...], ...]
    """The ranks of each class, indexed by the numbers in ``Node.classes``."""

    def ranks(self, node: Node) -> list[int]:
        return sorted(r for c in node.classes for r in self.class_ranks[c])

    def count(self, node: Node) -> int:
        return sum(len(self.class_ranks[c]) for c in node.classes)


def classes_of(stacks: Iterable[RankStack]) -> list[tuple[tuple[Frame, ...], list[int]]]:
    """Main-thread Python frames (innermost first) -> ranks; equal stacks share one class
    (``python_frames``: a native dump of one rank and not of its twin never splits them). Frame
    tuples shared by identity (host documents intern them) are grouped without hashing."""
    by_id: dict[int, tuple[tuple[Frame, ...], list[int]]] = {}
    by_value: dict[tuple[Frame, ...], tuple[tuple[Frame, ...], list[int]]] = {}
    for stack in stacks:
        main = stack.main
        frames = main.frames if main is not None else ()
        entry = by_id.get(id(frames))
        if entry is None:
            shown = python_frames(frames)
            entry = by_value.setdefault(shown, (shown, []))
            by_id[id(frames)] = entry
        entry[1].append(stack.rank)
    return list(by_value.values())


def build(stacks: Iterable[RankStack]) -> StackTree:
    """The prefix tree of the main threads of ``stacks``."""
    root = Node(None)
    ranks = []
    for index, (frames, members) in enumerate(classes_of(stacks)):
        ranks.append(tuple(sorted(members)))
        node = root
        node.classes.append(index)
        for frame in reversed(frames):
            child = node.children.get(frame)
            if child is None:
                child = node.children[frame] = Node(frame)
            child.classes.append(index)
            node = child
    return StackTree(root, tuple(ranks))


def divergence(tree: StackTree) -> Node | None:
    """The first node, from the outermost frame in, whose ranks split (several children, or
    some ranks end there while others go on); None when every rank shares one stack."""
    node = tree.root
    while True:
        kids = list(node.children.values())
        if len(kids) != 1 or tree.count(kids[0]) != tree.count(node):
            return node if len(tree.class_ranks) > 1 else None
        node = kids[0]


def leavers(tree: StackTree) -> tuple[int, ...]:
    """The ranks whose path leaves the common one: at the first split, every rank outside
    the branch that holds a strict majority of the ranks there (none without one). Ranks
    that wait at three places, two of them inside one training step, split 2/1/1 by
    position; their paths show the one rank that left the step."""
    split = divergence(tree)
    if split is None:
        return ()
    kids = sorted(split.children.values(), key=lambda n: -tree.count(n))
    if not kids or 2 * tree.count(kids[0]) <= tree.count(split):
        return ()
    common = set(tree.ranks(kids[0]))
    return tuple(r for r in tree.ranks(split) if r not in common)


def _chain(tree: StackTree, node: Node) -> tuple[list[Frame], Node]:
    """``node`` and its descendants while each has one child with the same ranks."""
    frames = [node.frame] if node.frame is not None else []
    while len(node.children) == 1:
        (child,) = node.children.values()
        if tree.count(child) != tree.count(node):
            break
        frames.append(child.frame)  # type: ignore[arg-type]
        node = child
    return frames, node


def to_json(tree: StackTree) -> dict[str, Any]:
    """``{"frames": [...], "ranks": "0-3,5", "count": 5, "children": [...]}``, chains of a
    single child folded into one node's ``frames``, at most ``MAX_JSON_NODES`` nodes."""
    budget = [MAX_JSON_NODES]

    def node_json(node: Node) -> dict[str, Any]:
        budget[0] -= 1
        frames, end = _chain(tree, node)
        kids = sorted(end.children.values(), key=lambda n: -tree.count(n))
        out: dict[str, Any] = {
            "frames": [str(f) for f in frames],
            "ranks": rank_ranges(tree.ranks(node)),
            "count": tree.count(node),
        }
        shown: list[dict[str, Any]] = []
        for kid in kids:
            if budget[0] <= 0:
                out["more_children"] = len(kids) - len(shown)
                break
            shown.append(node_json(kid))
        if shown:
            out["children"] = shown
        return out

    split = divergence(tree)
    doc = node_json(tree.root)
    if split is not None:
        doc["diverge_at"] = str(split.frame) if split.frame else "(outermost frame)"
        doc["branches"] = [
            {"frame": str(kid.frame), "ranks": rank_ranges(tree.ranks(kid))}
            for kid in sorted(split.children.values(), key=lambda n: -tree.count(n))[:16]
        ]
    return doc


def branch_lines(tree: StackTree, limit: int = 8) -> Sequence[str]:
    """Where the ranks diverge, one line per branch, for people (CLI and TUI)."""
    split = divergence(tree)
    if split is None:
        return []
    where = str(split.frame) if split.frame else "their outermost frame"
    kids = sorted(split.children.values(), key=lambda n: -tree.count(n))
    lines = [f"ranks diverge at {where}:"]
    lines += [f"  {_label(tree.ranks(k))} -> {k.frame}" for k in kids[:limit]]
    ended = tree.count(split) - sum(tree.count(k) for k in kids)
    if ended:
        stop = set(tree.ranks(split)) - {r for k in kids for r in tree.ranks(k)}
        lines.append(f"  {_label(stop)} stop there")
    if len(kids) > limit:
        lines.append(f"  … {len(kids) - limit} more branches")
    return lines


def _label(ranks: Iterable[int]) -> str:
    """``rank 2`` or ``ranks 0-1,3``: compact, for a line per branch of thousands of ranks."""
    unique = set(ranks)
    return f"{rank_noun(unique)} {rank_ranges(unique)}"
