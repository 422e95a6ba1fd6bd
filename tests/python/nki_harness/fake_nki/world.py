"""Synchronisation of one launch: barriers and collectives as rendezvous that
fail instead of hanging.

A rendezvous notices a mismatched partner, a partner that finished without
joining, a state where every live program waits (deadlock), and the launch's
deadline; the first root-cause failure is kept and every waiter is released.
"""

import threading
import time

from .errors import Aborted, NkiError
from .races import Races
from .undefined import Reads

# Ops run one at a time across program threads (each op is atomic with respect to
# the others, as the storages' locks make it in the Rust emulator). Barriers and
# collectives never hold it while they wait.
MEMORY = threading.RLock()


class _Rendezvous:
    """One barrier or collective instance: who must join, who did, and how it ended."""

    def __init__(self, kind, participants):
        self.kind = kind
        self.participants = participants
        self.payloads = []
        self.done = False
        self.error = None
        self.observed = 0


class World:
    """Synchronisation state of one launch."""

    def __init__(self, ranks, programs, deadline):
        self.ranks = ranks
        self.programs = programs
        self.deadline = deadline
        self.aborted = False
        self.error = None
        self._cv = threading.Condition()
        self._finished = [False] * (ranks * programs)
        self._waiting = [None] * (ranks * programs)
        self._rvs = {}
        self.undefined = Reads()
        self.races = Races(ranks, programs) if ranks * programs > 1 else None

    def slot_name(self, slot):
        return f"rank {slot // self.programs} program {slot % self.programs}"

    def fail(self, err):
        """Records the first root-cause failure and wakes every waiting program."""
        with self._cv:
            self._fail(err)

    def _fail(self, err):
        if self.error is None and not isinstance(err, Aborted):
            self.error = err
        self.aborted = True
        self._cv.notify_all()

    def finish(self, slot):
        """Marks a program as finished (successfully or not)."""
        with self._cv:
            self._finished[slot] = True
            self._waiting[slot] = None
            self._check_deadlock()
            self._cv.notify_all()

    def _check_deadlock(self):
        live = [s for s, done in enumerate(self._finished) if not done]
        if not live or self.error is not None or any(self._waiting[s] is None for s in live):
            return
        for rv in self._rvs.values():
            arrived = [s for s, _ in rv.payloads]
            gone = [p for p in rv.participants if self._finished[p] and p not in arrived]
            if not rv.done and arrived and gone:
                self._fail(self._missing_partner(gone[0], rv.kind, arrived[0]))
                return
        detail = "; ".join(f"{self.slot_name(s)} waits in {self._waiting[s]}" for s in live)
        self._fail(NkiError(None, f"deadlock: every live program is waiting and none can proceed ({detail})"))

    def rendezvous(self, me, key, kind, participants, payload, complete):
        """Joins rendezvous `key` as slot `me`; all `participants` must join with the same `kind`."""
        with self._cv:
            if self.aborted:
                raise Aborted()
            rv = self._rvs.setdefault(key, _Rendezvous(kind, participants))
            if rv.kind != kind or rv.participants != participants:
                err = NkiError(None, f"{self.slot_name(me)} issued {kind} over ranks {self._ranks(participants)} "
                                     f"where its partners issued {rv.kind} over ranks {self._ranks(rv.participants)} "
                                     "(programs must issue the same barriers and collectives in the same order)")
                self._fail(err)
                raise err
            rv.payloads.append((me, payload))
            last = len(rv.payloads) == len(participants)
            if not last:
                self._waiting[me] = kind
                self._check_deadlock()
        if last:
            if self.races is not None:
                self.races.synchronise(participants)
            self._complete(rv, complete)
        with self._cv:
            return self._wait(me, key, kind, rv)

    def _complete(self, rv, complete):
        try:
            with MEMORY:
                complete([p for _, p in rv.payloads])
        except Exception as e:  # reported to every participant instead of stranding them
            rv.error = e if isinstance(e, NkiError) else NkiError(rv.kind, f"{type(e).__name__}: {e}")
        with self._cv:
            if rv.error is not None:
                self._fail(rv.error)
            for p in rv.participants:
                self._waiting[p] = None
            rv.done = True
            self._cv.notify_all()

    def _wait(self, me, key, kind, rv):
        while True:
            if rv.done:
                rv.observed += 1
                if rv.observed == len(rv.participants):
                    del self._rvs[key]
                if rv.error is not None:
                    raise rv.error if rv.payloads[-1][0] == me else Aborted()
                return
            arrived = {s for s, _ in rv.payloads}
            gone = [p for p in rv.participants if self._finished[p] and p not in arrived]
            if gone:
                self._waiting[me] = None
                err = self._missing_partner(gone[0], kind, me)
                self._fail(err)
                raise err
            if self.aborted:
                self._waiting[me] = None
                raise Aborted()
            if time.monotonic() > self.deadline:
                self._waiting[me] = None
                err = NkiError(None, f"{self.slot_name(me)} timed out waiting in {kind}")
                self._fail(err)
                raise err
            self._cv.wait(0.1)

    def _missing_partner(self, partner, kind, waiter):
        """A partner that finished without joining is the root cause of a stall."""
        return NkiError(None, f"{self.slot_name(partner)} finished without joining {kind}, which "
                              f"{self.slot_name(waiter)} is waiting in")

    def _ranks(self, slots):
        return sorted({s // self.programs for s in slots})
