"""The world of nki.multi_rank_simulate: one kernel run per rank, each on its own thread, meeting
at the rendezvous of each collective (nki.collectives builds on `RankWorld.rendezvous`).

The ranks take turns (turns.py), as the cores of a launch do: only one rank runs at a time, in a
fixed order, so results do not depend on the host's scheduling, and a collective can never hang: when a rank arrives, every rank of its rank
list already waiting must be making the same collective (else rule `collective-mismatch`); a rank
list whose member returned without arriving, or a world where every unfinished rank waits and no
collective can complete, is refused (rule `collective-rendezvous`). No timeout is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .errors import NkiValidationError
from .turns import TurnTaking


@dataclass
class Arrival:
    """One rank's side of a collective."""
    signature: tuple  # what must be equal on every rank of the rank list
    label: str  # the collective as a message names it (op, shapes, group)
    members: tuple  # the ranks of the caller's rank list, in the list's order
    payload: Any  # the caller's contribution
    combine: Callable  # [payload per member, in members' order] -> [result per member]


@dataclass(frozen=True)
class RankSeat:
    """Where a kernel run sits: its rank in `world` (run.rank_seat, set by Kernel.run)."""
    world: "RankWorld"
    rank: int


class RankWorld(TurnTaking):
    thread_name = "nki-rank"

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size
        self.waiting: dict[int, Arrival] = {}  # rank -> its collective (state "waiting")
        self.results: dict[int, Any] = {}

    def _pass_turn(self, me: int) -> bool:
        """With no rank ready while some wait, no collective can complete: refused, not hung."""
        if super()._pass_turn(me) or not self.waiting:
            return True
        stuck = "; ".join(f"rank {r} at {a.label} with ranks {list(a.members)}"
                          for r, a in sorted(self.waiting.items()))
        raise NkiValidationError(
            "collective-rendezvous", f"no collective can complete: {stuck}; every rank of a "
            "rank list must make the same collectives in the same order")

    def _finish(self, me: int) -> None:
        with self.cond:
            self.state[me] = "done"
            for waiter, arrival in sorted(self.waiting.items()):
                if me in arrival.members:
                    raise NkiValidationError(
                        "collective-rendezvous", f"rank {waiter} waits at {arrival.label} with "
                        f"ranks {list(arrival.members)}, but rank {me} returned without reaching "
                        "it; every rank of a rank list must make the same collectives")
            if any(s != "done" for s in self.state):
                self._pass_turn(me)

    def rendezvous(self, me: int, arrival: Arrival):
        """Waits until every rank of the caller's rank list has arrived at this collective and
        returns the caller's result of `arrival.combine`."""
        with self.cond:
            for other, theirs in sorted(self.waiting.items()):
                if (other in arrival.members or me in theirs.members) and \
                        theirs.signature != arrival.signature:
                    raise NkiValidationError(
                        "collective-mismatch", f"rank {me} calls {arrival.label} but rank "
                        f"{other} waits at {theirs.label}; every rank of a rank list must make "
                        "the same collective (operation, op, shapes, dtypes, replica group) in "
                        "the same order")
            for member in arrival.members:
                if self.state[member] == "done":
                    raise NkiValidationError(
                        "collective-rendezvous", f"rank {me} calls {arrival.label} with ranks "
                        f"{list(arrival.members)}, but rank {member} already returned without "
                        "reaching it")
            self.waiting[me] = arrival
            if all(m in self.waiting for m in arrival.members):  # the last to arrive goes on
                payloads = [self.waiting.pop(m).payload for m in arrival.members]
                for member, result in zip(arrival.members, arrival.combine(payloads)):
                    self.results[member] = result
                    self.state[member] = "ready"
                return self.results.pop(me)
            self.state[me] = "waiting"
            self._pass_turn(me)
        self._wait_turn(me)
        with self.cond:
            return self.results.pop(me)
