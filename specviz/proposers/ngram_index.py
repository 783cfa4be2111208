"""An incremental n-gram index over the committed tokens, shared by the retrieval proposers.

It maps every n-gram (min_n ≤ n ≤ max_n) to the position right after its latest occurrence,
so a lookup is one dict access and each cycle indexes only the tokens committed since the
last one; nothing is ever rescanned. An n-gram is indexed only once a token has followed it,
which leaves out the trivial match of the context's own last n tokens.
"""
from __future__ import annotations


class NgramIndex:
    """n-gram (a tuple of ids) → position of the token that followed its latest occurrence."""

    def __init__(self, min_n: int = 1, max_n: int = 3):
        if not 1 <= min_n <= max_n:
            raise ValueError(f"n-gram sizes need 1 ≤ min_n ≤ max_n, got {min_n} and {max_n}")
        self.min_n, self.max_n = min_n, max_n
        self.reset()

    def reset(self) -> None:
        self.ids: list[int] = []  # our own copy of the committed tokens
        self.table: dict[tuple[int, ...], int] = {}
        self.indexed = 0  # continuation positions below this are in the table
        self.updates = 0  # n-gram insertions so far (lets tests check the work is incremental)

    def __len__(self) -> int:
        return len(self.ids)

    def update(self, ids: list[int]) -> None:
        """Index the tokens of `ids` not seen yet; `ids` must extend what was seen before."""
        if len(ids) < len(self.ids):  # a new sequence (a fresh run): start over
            self.reset()
        self.ids.extend(ids[len(self.ids):])
        # position j is the continuation of the n-grams ending just before it; later wins
        for j in range(max(self.indexed, 1), len(self.ids)):
            for n in range(self.min_n, min(self.max_n, j) + 1):
                self.table[tuple(self.ids[j - n: j])] = j
                self.updates += 1
        self.indexed = len(self.ids)

    def find(self, key: tuple[int, ...]) -> int | None:
        """Position after the latest earlier occurrence of `key`, or None."""
        return self.table.get(key)

    def lookup(self, tail: list[int]) -> tuple[int, int] | None:
        """Match the last n tokens of committed + `tail`, longest n first: (position, n) or None."""
        seq_end = self.ids[-self.max_n:] + list(tail)
        for n in range(min(self.max_n, len(seq_end)), self.min_n - 1, -1):
            pos = self.table.get(tuple(seq_end[-n:]))
            if pos is not None:
                return pos, n
        return None

    def continuation(self, pos: int, length: int, tail: list[int] = ()) -> list[int]:
        """Up to `length` tokens of committed + tail + (the copy itself), read from `pos` on.

        Reading past the end keeps copying what was just copied: a text that repeats with
        period P (committed + tail − pos) is continued periodically, which is what a model
        stuck in a loop will do next.
        """
        tail, n_ids = list(tail), len(self.ids)
        end = n_ids + len(tail)
        out: list[int] = []
        for src in range(pos, pos + length):  # no copy of the committed list: this runs per branch
            if src < n_ids:
                out.append(self.ids[src])
            else:
                out.append(tail[src - n_ids] if src < end else out[src - end])
        return out


class MissBackoff:
    """Skip drafting after repeated complete misses: 1 cycle, then 2, 4, ... up to `max_skip`.

    On a CPU every draft node makes a verify pass cost more than a plain step, so a proposer
    whose drafts keep missing should stop paying for them; a lookup is cheap, so retry now and then.
    (Off by default since the planner cuts what does not pay; kept for the lessons and for study.)
    """

    def __init__(self, patience: int = 2, max_skip: int = 16):
        self.patience, self.max_skip = patience, max_skip
        self.reset()

    def reset(self) -> None:
        self.misses = 0  # complete misses in a row
        self.skip = 0  # cycles left to skip
        self.next_skip = 1  # length of the next skip

    def state(self) -> dict:
        return {"misses": self.misses, "skip": self.skip, "next_skip": self.next_skip}

    def set_state(self, state: dict) -> None:
        self.misses, self.skip, self.next_skip = state["misses"], state["skip"], state["next_skip"]

    def skipping(self) -> bool:
        """True (and one fewer left) while a skip is under way."""
        if self.skip > 0:
            self.skip -= 1
            return True
        return False

    def observe(self, cycle) -> None:
        if not cycle.nodes:  # nothing was drafted: nothing learnt
            return
        if cycle.accepted:
            self.reset()
            return
        self.misses += 1
        if self.misses >= self.patience:  # keeps missing: skip, and skip longer each time
            self.skip = self.next_skip
            self.next_skip = min(2 * self.next_skip, self.max_skip)


class KeepsBackoff:
    """For a retrieval proposer whose only state between cycles is its `backoff` (a MissBackoff):
    it learns from each cycle, and that is all a resumed run needs, since the index rebuilds from the ids."""
    backoff: MissBackoff

    def observe(self, cycle) -> None:
        self.backoff.observe(cycle)

    def state(self) -> dict:
        return {"backoff": self.backoff.state()}  # the n-gram index rebuilds from the ids

    def set_state(self, state: dict) -> None:
        self.backoff.set_state(state["backoff"])
