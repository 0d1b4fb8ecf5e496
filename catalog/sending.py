"""Sending claimed deliveries concurrently inside one worker process.

A delivery pass (``catalog.delivery.deliver_due``) runs here: it claims due deliveries
(``delivery_claim_due``), sends them through a bounded pool of threads, and records each
outcome as it arrives (plain successes together, ``catalog.success_batches``; the rest
through ``delivery_record``), claiming more while sends are in flight, so a slow or hung
endpoint never holds up the others.

The model: **one thread owns the database, a bounded pool of threads only sends.**

- The pass's own thread claims, checks, dispatches and records: every statement runs on
  the one database connection the task already has (and, in tests, inside the test's
  transaction); the pool threads never touch the database (``delivery_send`` is pure
  network: the guarded ``outbound.Sender``, Django's mail backend, the watchdog's API).
- At most ``concurrency`` sends are in flight (``TIDEMARK_DELIVERY_CONCURRENCY``), at most
  ``endpoint_concurrency`` per endpoint (``TIDEMARK_DELIVERY_ENDPOINT_CONCURRENCY``): an
  endpoint that hangs until the total deadline holds its own slots, never the others'.
  An endpoint gets one send in flight until it answers 2xx in the pass, then its share.
  A pass holds at most four times an endpoint's share in claims (in flight or waiting
  for a slot), and no more than four while it holds any of an endpoint that has not
  answered; claims waiting behind a slow send go back when the pass drains (``run``) or
  their lease runs short, so most of a hung endpoint's backlog stays in the database.
- Why threads and not an asyncio client: the sender's SSRF guard is a synchronous
  httpcore network backend (resolve, vet every address, connect to the vetted one) and
  its total deadline a per-thread clock; a thread pool keeps that one guarded code path
  for the catalog and the watchdog, fits Celery's solo and prefork pools unchanged (no
  event loop inside a task), and sending is I/O: the threads wait on sockets, outside
  the GIL. Measured (bench/README.md, Delivery; one worker process, a shared 2-core
  machine): 700 to 890 deliveries/s to a receiver answering at once (104/s sending one
  at a time), 520 to 550/s to one answering in 50 ms (16/s; the limit is 10 endpoints x
  4 in flight / 50 ms = 800/s), the other endpoints' p99 under 510 ms while one hangs.
  A delivery costs the worker about 0.9 to 1.2 ms of CPU: the claim (one statement
  leases and reads a batch on PostgreSQL), one statement per round of successes, and the
  send through the guarded connection pool, driven without httpx's client layer.

Every guarantee of the sequential pass holds: claims are leased and fenced by a token;
every attempt of a delivery carries the same ``webhook-id``; outcomes are classified and
backed off in ``delivery_record``, which writes only while the claim token matches. And
nothing is sent that the pass cannot stand behind:

- before each round of dispatches one query reads the throttles of the endpoints about
  to be sent to; a throttled endpoint's (429 / 503 with ``Retry-After``) claims are
  handed back unsent; the query also proves the database still answers;
- a claim is sent only while its lease (measured from before the claim was made) outlasts
  one send's total deadline plus ``lease_margin_seconds``; later, it is handed back;
- once the database stops answering (a claim, the throttle query or a record fails with
  a connection error), nothing more is sent: sends in flight finish (they cannot be
  recalled), the claims not yet sent stay leased until their leases run out, and the
  next pass on a working database sends them, with the same ``webhook-id``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.utils import timezone

import outbound

from . import delivery, success_batches
from .crashpoints import crashpoint
from .models import Delivery, Endpoint

logger = logging.getLogger(__name__)

# While sends are in flight and the last claim found nothing, the pass claims again after
# this long (a quarter of it after a claim cut short by the endpoints' shares): new work
# (a publish during a hung endpoint's timeout) waits at most this for a claim, and an
# idle pass costs a few claims a second.
CLAIM_POLL_SECONDS = 0.05
# A send in flight this long is slow (its endpoint may hang until the deadline): a
# draining pass, which must wait for it anyway, keeps claiming for the endpoints that
# answer meanwhile.
SLOW_SEND_SECONDS = 1.0
# A pass holds at most this many claims per send slot of an endpoint (in flight plus
# waiting for a slot): enough that a claim brings tens of deliveries and keeps the slots
# busy between claims, few enough that a hung endpoint's backlog (one slot until it
# answers) stays unleased in the database.
HELD_PER_SLOT = 4


@dataclass(frozen=True)
class Limits:
    """How much one worker process sends at once.

    Args:
        concurrency: sends in flight at most, all endpoints together (>= 1).
        endpoint_concurrency: sends in flight at most to one endpoint (>= 1).
    """

    concurrency: int
    endpoint_concurrency: int

    @classmethod
    def from_settings(cls) -> Limits:
        config = settings.TIDEMARK_DELIVERY
        return cls(
            concurrency=max(1, config["concurrency"]),
            endpoint_concurrency=max(1, config["endpoint_concurrency"]),
        )


_pool_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, size, executor)


def _executor(size: int) -> ThreadPoolExecutor:
    """The process's send pool of ``size`` threads (made anew after a fork, or when the
    setting changed); threads start as they are first needed."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] != size:
            if _pool is not None and _pool[0] == os.getpid():
                _pool[2].shutdown(wait=False)
            _pool = (
                os.getpid(),
                size,
                ThreadPoolExecutor(max_workers=size, thread_name_prefix="tidemark-send"),
            )
        return _pool[2]


@dataclass(frozen=True)
class _Held:
    """A claim this pass holds: sent once a slot is free, while ``send_by`` (monotonic
    seconds) has not passed."""

    claim: delivery.Claim
    send_by: float


@dataclass(frozen=True)
class _Sent:
    started_at: datetime
    result: outbound.AttemptResult


def _send(held: _Held, sender: outbound.Sender) -> _Sent | None:
    """Send one claim on a pool thread (no database); None: too late to start, unsent."""
    if time.monotonic() > held.send_by:
        return None
    started_at = timezone.now()
    return _Sent(started_at, delivery.delivery_send(held.claim, sender=sender, now=started_at))


class _DatabaseLost(Exception):
    """The database stopped answering during the pass."""


def _database_answers() -> bool:
    try:
        return connection.connection is not None and connection.is_usable()
    except Exception:  # any failure to ask is an answer
        return False


class Pass:
    """One delivery pass; ``run()`` once. See the module docstring for the model."""

    def __init__(
        self,
        *,
        sender: outbound.Sender,
        summary: delivery.PassSummary,
        batch_size: int,
        max_batches: int,
        max_seconds: float,
        limits: Limits,
    ) -> None:
        config = settings.TIDEMARK_DELIVERY
        self.sender = sender
        self.summary = summary
        self.batch_size = batch_size
        self.max_batches = max_batches
        self.max_seconds = max_seconds
        self.limits = limits
        self.lease_seconds = config["lease_seconds"]
        # A claim is sent only while its lease outlasts one send plus the margin.
        self.send_room = config["total_deadline"] + config["lease_margin_seconds"]
        self.max_attempts = config["max_attempts"]
        self.waiting: dict[int, deque[_Held]] = {}  # by endpoint, oldest first
        self.in_flight: dict[Future, _Held] = {}
        self.per_endpoint: Counter[int] = Counter()  # in flight, by endpoint
        self.proven: set[int] = set()  # endpoints that answered 2xx in this pass
        self.database_lost = False
        self.claimed_total = 0  # claims made, against the pass's budget
        self.out_of_lease = False  # a claim waited too long for a slot: drain
        self.draining = False  # see run()
        self.sent_at: dict[Future, float] = {}  # monotonic seconds, by send in flight
        # Draining claims nothing more this long after max_seconds: a pass ends within
        # about max_seconds plus two sends' deadlines.
        self.hard_stop = max_seconds + self.send_room

    # --- the loop -----------------------------------------------------------------------

    def run(self) -> delivery.PassSummary:
        """Claim, send and record until nothing is due and nothing is held, or the
        database is lost; waits for every send it started before returning.

        After ``max_batches`` x ``batch_size`` claims or ``max_seconds`` (or once a claim
        outwaited its lease) the pass *drains*: it claims no more, except while a send it
        must wait for anyway has been in flight over ``SLOW_SEND_SECONDS`` (an endpoint
        hanging until its deadline): then it goes on claiming for the endpoints that
        answered 2xx in the pass, so their webhooks are not held up behind the hung one,
        and hands back the claims waiting behind a slow send. ``send_room`` after
        ``max_seconds`` it claims nothing more at all.
        """
        pool = _executor(self.limits.concurrency)
        self.sender.pool()  # built on this thread: the pool threads share it
        started = time.monotonic()
        budget = self.max_batches * self.batch_size
        next_claim, first = 0.0, True
        while True:
            if self.database_lost and not self.in_flight:
                break
            elapsed = time.monotonic() - started
            self.draining = (
                self.claimed_total >= budget or elapsed >= self.max_seconds or self.out_of_lease
            )
            if self.draining:
                self.release_behind_slow_sends(all_of_them=elapsed >= self.hard_stop)
            held = len(self.in_flight) + self.waiting_count()
            may_claim = not self.database_lost and (
                first
                or not self.draining
                or (elapsed < self.hard_stop and self.slow_send_in_flight())
            )
            if (
                may_claim
                and held < self.limits.concurrency
                and (held == 0 or time.monotonic() >= next_claim)
            ):
                only_answering = self.draining and not first
                # The budget bounds a pass's claims, not a drain's (claims it must make
                # while it waits on a slow send anyway).
                left = self.batch_size if only_answering else budget - self.claimed_total
                limit = max(1, min(self.batch_size, left))
                got = self.claim(limit, only_answering=only_answering)
                first = False
                # A full claim may have left more: claim again once there is room. A
                # partial one was cut by the endpoints' shares or found all there was.
                self.summary.more_due = got == limit
                if got == limit:
                    next_claim = 0.0
                else:
                    pause = CLAIM_POLL_SECONDS if not got else CLAIM_POLL_SECONDS / 4
                    next_claim = time.monotonic() + pause
                if not self.in_flight and not self.waiting_count():
                    if self.database_lost or self.draining or not self.held_by_rate():
                        self.summary.more_due = self.summary.more_due or self.draining
                        break
                    # Due deliveries wait only for their endpoints' rate credit.
                    self.summary.more_due = True
                    if time.monotonic() - started + delivery.RATE_WAIT_SECONDS >= self.max_seconds:
                        break
                    time.sleep(delivery.RATE_WAIT_SECONDS)
                    continue
            elif held == 0:
                if self.draining and not self.database_lost:
                    self.summary.more_due = True  # possibly: the next pass will tell
                break
            if not self.database_lost:
                self.dispatch(pool)
            self.collect(timeout=self.wait_timeout(may_claim, next_claim))
        if self.database_lost:
            self.summary.more_due = False  # beat's sweep rings again; it may answer by then
            self.summary.unsent += self.waiting_count()
            self.summary.claimed -= self.waiting_count()
            self.waiting.clear()
        return self.summary

    def slow_send_in_flight(self) -> bool:
        """Whether a send has been in flight over ``SLOW_SEND_SECONDS``."""
        now = time.monotonic()
        return any(now - at > SLOW_SEND_SECONDS for at in self.sent_at.values())

    def release_behind_slow_sends(self, *, all_of_them: bool) -> None:
        """Hand back (unsent, uncounted) the waiting claims of endpoints that have not
        answered 2xx in the pass and have a send in flight, or every waiting claim."""
        behind = [
            endpoint_id
            for endpoint_id, queue in self.waiting.items()
            if queue
            and (
                all_of_them
                or (endpoint_id not in self.proven and self.per_endpoint[endpoint_id] > 0)
            )
        ]
        claims = [held.claim for endpoint_id in behind for held in self.waiting.pop(endpoint_id)]
        if claims:
            self.summary.claimed -= len(claims)
            self.summary.released += self.release(claims)

    def waiting_count(self) -> int:
        return sum(len(queue) for queue in self.waiting.values())

    def wait_timeout(self, may_claim: bool, next_claim: float) -> float | None:
        """How long to wait for a send to finish: until the next claim is due when one
        may be made, else until a send finishes (None)."""
        held = len(self.in_flight) + self.waiting_count()
        if may_claim and held < self.limits.concurrency:
            return max(0.0, next_claim - time.monotonic())
        if self.draining and self.in_flight:
            return CLAIM_POLL_SECONDS  # a send may become slow: judge again soon
        return None

    # --- claim ----------------------------------------------------------------------------

    def claim(self, limit: int, *, only_answering: bool = False) -> int:
        """Claim up to ``limit`` within the endpoints' shares (``only_answering``: for
        the endpoints that answered 2xx in the pass only); returns how many."""
        held = Counter(self.per_endpoint)
        for endpoint_id, queue in self.waiting.items():
            held[endpoint_id] += len(queue)
        named = self.proven if only_answering else self.proven | {k for k, n in held.items() if n}
        room = {
            endpoint_id: HELD_PER_SLOT * self.slots(endpoint_id) - held[endpoint_id]
            for endpoint_id in named
        }
        # Any other endpoint: its full share, as a batch would give it (it is sent one at
        # a time until it answers 2xx); none at all for a draining pass (see run).
        default_room = 0 if only_answering else HELD_PER_SLOT * self.limits.endpoint_concurrency
        # The database set each lease a moment after this: measuring from here is safe.
        asked_at = time.monotonic()
        try:
            claims = delivery.delivery_claim_due(
                limit=limit,
                lease_seconds=self.lease_seconds,
                now=timezone.now(),
                room=room,
                default_room=default_room,
            )
        except (OperationalError, InterfaceError):
            if _database_answers():
                raise
            self.lose_database("claiming")
            return 0
        self.summary.claims_made += 1
        if not claims:
            self.summary.claims_empty += 1
            return 0
        crashpoint("delivery.after_claim")
        self.summary.claimed += len(claims)
        self.claimed_total += len(claims)
        send_by = asked_at + self.lease_seconds - self.send_room
        for claim in claims:
            self.waiting.setdefault(claim.endpoint_id, deque()).append(_Held(claim, send_by))
        return len(claims)

    def held_by_rate(self) -> bool:
        return delivery.deliveries_held_by_rate(now=timezone.now())

    # --- dispatch -------------------------------------------------------------------------

    def dispatch(self, pool: ThreadPoolExecutor) -> None:
        """Start as many waiting claims as the limits allow, endpoints taking turns."""
        room = self.limits.concurrency - len(self.in_flight)
        ready = [
            endpoint_id
            for endpoint_id, queue in self.waiting.items()
            if queue and self.per_endpoint[endpoint_id] < self.slots(endpoint_id)
        ]
        if room <= 0 or not ready:
            return
        try:
            paused = self.paused_endpoints(ready)
        except _DatabaseLost:
            return
        handed_back: list[delivery.Claim] = []
        for endpoint_id in paused:
            queue = self.waiting.pop(endpoint_id)
            handed_back.extend(held.claim for held in queue)
            self.summary.throttled += len(queue)
        ready = [endpoint_id for endpoint_id in ready if endpoint_id not in paused]
        late: list[delivery.Claim] = []
        while room > 0 and ready:
            still_ready = []
            for endpoint_id in ready:
                if room <= 0:
                    break
                queue = self.waiting[endpoint_id]
                held = queue.popleft()
                if time.monotonic() > held.send_by:
                    late.append(held.claim)  # slow sends ate its lease
                elif held.claim.attempt_in_budget > self.max_attempts:
                    self.record(held, _Sent(timezone.now(), delivery._exhausted()))
                else:
                    future = pool.submit(_send, held, self.sender)
                    self.in_flight[future] = held
                    self.sent_at[future] = time.monotonic()
                    self.per_endpoint[endpoint_id] += 1
                    room -= 1
                if queue and self.per_endpoint[endpoint_id] < self.slots(endpoint_id):
                    still_ready.append(endpoint_id)
            ready = still_ready
        self.waiting = {k: v for k, v in self.waiting.items() if v}
        self.summary.claimed -= len(handed_back) + len(late)
        self.summary.released += self.release(handed_back + late)
        if late:
            # Slow sends ate the lease: claim no more in this pass; the next one will.
            self.out_of_lease = True

    def slots(self, endpoint_id: int) -> int:
        """Sends in flight allowed to the endpoint: one until it answered 2xx in this
        pass, then its share. A throttling (429) or failing endpoint thus gets one
        request, whose answer is recorded before the next is sent, not a volley."""
        return self.limits.endpoint_concurrency if endpoint_id in self.proven else 1

    def paused_endpoints(self, endpoint_ids: list[int]) -> set[int]:
        """Which of ``endpoint_ids`` are throttled now (a 429 or 503 with Retry-After, met
        by this pass or another worker): one query, which also proves the database answers
        before anything more is sent. (A claim of an endpoint disabled meanwhile is still
        sent, as a sequential pass did: it was claimed while the endpoint was active.)"""
        # Plain SQL: it runs before every round of dispatches, tens of times a second.
        sql = (
            f"SELECT id FROM {Endpoint._meta.db_table} "  # noqa: S608 - placeholders only
            f"WHERE throttled_until > %s AND id IN ({', '.join(['%s'] * len(endpoint_ids))})"
        )
        try:
            with connection.cursor() as cursor:
                now = connection.ops.adapt_datetimefield_value(timezone.now())
                cursor.execute(sql, [now, *endpoint_ids])
                return {row[0] for row in cursor.fetchall()}
        except DatabaseError:
            self.lose_database("checking throttles")
            raise _DatabaseLost from None

    def release(self, claims: list[delivery.Claim]) -> int:
        if not claims:
            return 0
        try:
            return delivery.delivery_release(claims)
        except DatabaseError:
            self.lose_database("handing claims back")
            return 0

    # --- record ---------------------------------------------------------------------------

    def collect(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` seconds (None: until one finishes) for sends, and record
        every one that finished: plain successes together, the rest one by one."""
        if not self.in_flight:
            return
        done, _ = wait(list(self.in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
        successes: list[tuple[_Held, _Sent]] = []
        for future in done:
            held = self.in_flight.pop(future)
            del self.sent_at[future]
            self.per_endpoint[held.claim.endpoint_id] -= 1
            try:
                sent = future.result()
            except Exception:  # a bug in a sender: the attempt is not lost, its lease runs out
                logger.exception("delivery %s: sending failed", held.claim.delivery_id)
                self.summary.lost += 1
                continue
            if sent is None:  # it waited past its lease's room for a thread: unsent
                self.summary.claimed -= 1
                self.summary.released += self.release([held.claim])
                self.out_of_lease = True
                continue
            crashpoint("delivery.after_send")
            if success_batches.plain_success(held.claim, sent.result):
                self.proven.add(held.claim.endpoint_id)
                successes.append((held, sent))
            else:
                self.record(held, sent)
        if successes and connection.vendor == "postgresql":
            self.record_successes(successes)  # even one: one plain statement
        else:  # the embedded SQLite, whose SQL the batch does not speak
            for held, sent in successes:
                self.record(held, sent)

    def record(self, held: _Held, sent: _Sent) -> None:
        claim = held.claim
        state = None
        if not self.database_lost:
            try:
                state = delivery.delivery_record(
                    claim=claim, result=sent.result, started_at=sent.started_at, now=timezone.now()
                )
            except Exception as exc:  # one bad row must not starve the rest of the pass
                if isinstance(exc, DatabaseError) and not _database_answers():
                    self.lose_database("recording an outcome")
                else:
                    logger.exception("delivery %s: recording the outcome failed", claim.delivery_id)
        crashpoint("delivery.after_record")
        self.count(state)

    def record_successes(self, sent: list[tuple[_Held, _Sent]]) -> None:
        recorded: set[int] = set()
        if not self.database_lost:
            try:
                recorded = success_batches.successes_record(
                    [(held.claim, done.started_at, done.result) for held, done in sent],
                    now=timezone.now(),
                )
            except Exception as exc:  # as in record: fall back to one by one
                if isinstance(exc, DatabaseError) and not _database_answers():
                    self.lose_database("recording outcomes")
                else:
                    logger.exception("deliveries: recording %d successes failed", len(sent))
                    for held, done in sent:
                        self.record(held, done)
                    return
        for held, _ in sent:
            crashpoint("delivery.after_record")
            ok = held.claim.delivery_id in recorded
            self.count(Delivery.State.SUCCEEDED if ok else None)

    def count(self, state: str | None) -> None:
        if state is None:
            self.summary.lost += 1
        else:
            self.summary.by_state[state] = self.summary.by_state.get(state, 0) + 1

    def lose_database(self, doing: str) -> None:
        if not self.database_lost:
            logger.error(
                "deliveries: the database stopped answering while %s; nothing more is sent "
                "this pass (%d in flight finish, %d claims wait for their leases to run out)",
                doing,
                len(self.in_flight),
                self.waiting_count(),
            )
        self.database_lost = True
