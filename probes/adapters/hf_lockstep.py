"""Which rows the `full` evaluator of `probes.adapters.hf` forwards together, and in what shapes.

A forward of one short row uses a CPU's matrix units poorly, and a forward of a token or two
costs a read of every weight: a fact-swap pair under `full` is 7 forward calls, 4 of them of
1–3 tokens. So rows of several pairs are forwarded together — without giving up the exact
zeros, which need the rows that are compared (a base and its variant, a text with and without
its first document) computed at the same batch index of calls of the same shape (a
multi-threaded CPU matrix product may round a row by where it sits in a batch).

A **unit** is what the caller related through `score_shared`'s `parent` (declared: a variant
and its base, even where nothing is shared and `fork_plan` makes it a root of its own): its
rows in running order — each root of the forking plan, then depth first its forks, the
earliest born first. Rows the caller compares bit for bit are one unit's; `score`, which
declares nothing, forwards every row alone.

Units of one **shape** (`tree`: per row, which earlier row it forks from and the ranks of its
birth and end among the unit's marks) run in lockstep, unit i at batch index i of every call:
each row is cut at the same ranked marks, so step j's segment m of every unit is one call. A
segment between two marks of given ranks is padded to the longest such segment in the group
(pad slots: doc id −1, seen by no query; a pad query sees only itself), so two rows of a unit
cut at the same marks — a base and its variant after their fork, two texts that differ only
before a boundary — are forwarded in identical shapes at the same index. A group holds at most
MAX_UNITS units and MAX_SLOTS padded cache slots in all (a long row goes alone: its attention
grows with the square of its length, and one 4 K-token row forwards faster than four).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

MAX_UNITS = 8
MAX_SLOTS = 2048


class Lockstep:
    """The forking plan of one `full` call — (birth, end, parent) from `fork_plan`, the
    targets each row must score (`wanted`), and the caller's `declared` parents (None: rows
    unrelated, each forwarded alone) — cut into groups of units."""

    def __init__(self, birth, end, parent, wanted, declared=None) -> None:
        self.birth, self.end, self.parent, self.wanted = birth, end, parent, wanted
        self.declared = declared
        B = len(parent)
        self.root = np.arange(B)
        for r in range(B):
            while self.parent[self.root[r]] >= 0:
                self.root[r] = self.parent[self.root[r]]

    def groups(self) -> list[list[list[int]]]:
        """Units of one shape, the shortest first, as many a group as MAX_UNITS and MAX_SLOTS
        allow; every unit alone when nothing was declared."""
        units = self.units()
        if self.declared is None:
            return [[u] for u in units]
        shapes: dict[tuple, list] = {}
        for unit in units:
            shapes.setdefault(self.tree(unit), []).append(unit)
        groups = []
        for tree, members in shapes.items():
            members.sort(key=lambda u: (max(int(self.end[r]) for r in u), u[0]))
            group: list[list[int]] = []
            for unit in members:
                wider = [*group, unit]
                if group and (
                    len(wider) > MAX_UNITS or len(wider) * self.width(wider, tree) > MAX_SLOTS
                ):
                    groups.append(group)
                    wider = [unit]
                group = wider
            groups.append(group)
        return groups

    def units(self) -> list[list[int]]:
        """Every unit's rows in running order (see the module docstring)."""
        B = len(self.parent)
        link = list(range(B))

        def find(x: int) -> int:
            while link[x] != x:
                link[x] = link[link[x]]
                x = link[x]
            return x

        for r in range(B):
            for p in (self.parent[r], -1 if self.declared is None else self.declared[r]):
                if p >= 0:
                    link[find(r)] = find(int(p))
        children = {
            r: sorted(np.flatnonzero(self.parent == r).tolist(), key=lambda c: self.birth[c])
            for r in range(B)
        }
        units: dict[int, list[int]] = {}
        for top in np.flatnonzero(self.parent < 0).tolist():
            order, stack = [], [top]
            while stack:
                r = stack.pop()
                order.append(r)
                stack.extend(reversed(children[r]))
            units.setdefault(find(top), []).extend(order)
        return list(units.values())

    def birth_of(self, r: int) -> int:
        return int(self.birth[r]) if self.parent[r] >= 0 else 0

    def marks(self, unit: Sequence[int]) -> list[int]:
        """Where the unit's rows start, fork and stop, in order (0 included)."""
        return sorted({0, *(self.birth_of(r) for r in unit), *(int(self.end[r]) for r in unit)})

    def tree(self, unit: Sequence[int]) -> tuple:
        """The unit's shape: per row in running order, (the step of the row it forks from or
        −1, the ranks of its birth and of its end among the unit's marks, whether it has
        neither a target to score nor a fork: skipped)."""
        step = {r: j for j, r in enumerate(unit)}
        rank = {v: i for i, v in enumerate(self.marks(unit))}
        shape = []
        for r in unit:
            up = step[int(self.parent[r])] if self.parent[r] >= 0 else -1
            b = self.birth_of(r)
            skip = not (self.parent == r).any() and not self.wanted[r, b + 1 :].any()
            shape.append((up, rank[b], rank[int(self.end[r])], bool(skip)))
        return tuple(shape)

    def cuts(self, unit: Sequence[int], j: int) -> list[int]:
        """Where row `unit[j]` is cut: its birth, every later birth in its forking family (the
        rows of its root), its end — so a row and its forks forward what follows a birth in
        identical pieces."""
        r = unit[j]
        b, e = self.birth_of(r), int(self.end[r])
        born = {
            int(self.birth[x]) for x in unit if self.parent[x] >= 0 and self.root[x] == self.root[r]
        }
        return sorted({b, e} | {f for f in born if b < f < e})

    def padding(self, group, tree) -> dict[tuple[int, int], int]:
        """Padded length of a segment by the ranks of its two marks: the group's longest."""
        longest: dict[tuple[int, int], int] = {}
        for unit in group:
            rank = {v: i for i, v in enumerate(self.marks(unit))}
            for j, step in enumerate(tree):
                if step[3]:
                    continue
                for s, e in itertools.pairwise(self.cuts(unit, j)):
                    key = (rank[s], rank[e])
                    longest[key] = max(longest.get(key, 0), e - s)
        return longest

    def width(self, group, tree) -> int:
        """Cache slots the widest row of a group reaches, its segments padded."""
        pad = self.padding(group, tree)
        unit = group[0]
        rank = {v: i for i, v in enumerate(self.marks(unit))}
        at_cut: dict[tuple[int, int], int] = {}
        width = 0
        for j, (up, born, _, skip) in enumerate(tree):
            slots = at_cut.get((up, born), 0) if up >= 0 else 0
            if skip:
                continue
            cuts = self.cuts(unit, j)
            for s, e in itertools.pairwise(cuts):
                slots += pad[(rank[s], rank[e])]
                at_cut[(j, rank[e])] = slots
            width = max(width, slots)
        return width
