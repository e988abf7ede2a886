"""The backing store as a client sees it: PostgreSQL behind a bounded connection pool, read
with a retry policy on store timeouts (asyncio: the open-loop client of traffic.py runs every
request as a task of one event loop).

- The pool holds `size` open connections. A read waits at most `acquire_timeout_s` for a free
  one; when none frees up in time the read is *refused* (the pool is full).
- Each query runs under PostgreSQL's `statement_timeout`; a query that runs longer is
  cancelled by the server (a *timeout*).
- A refused or timed-out read is a store timeout for the client. The retry policy tries again
  after `backoff_s`, up to `retries` more times; with `retries=0` the policy is off.
- The query is a primary-key SELECT of the value with `pg_sleep(query_s)` in the same
  statement: the query's service time, during which it holds its connection (a real query's
  cost on a loaded database, which a primary-key lookup on this idle one does not have).

Every attempt, every refusal and timeout, and each connection's busy interval are logged with
their times so that the driver can count them per second.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import cast


class Refused(Exception):
    """No pool connection became free within the acquire timeout."""


@dataclass
class StoreLog:
    queries: list = field(default_factory=list)  # (time, slot): a query sent to the server
    refused: list = field(default_factory=list)  # (time, slot): no connection in time
    timeouts: list = field(default_factory=list)  # (time, slot): statement_timeout cancelled it
    busy: list = field(default_factory=list)  # (start, end): a connection in use
    failed: list = field(default_factory=list)  # (time, slot): every attempt failed

    def add(self, name: str, item) -> None:
        getattr(self, name).append(item)


class BoundedPool:
    """`size` psycopg async connections handed out one reader at a time. Open it with
    `await pool.open()` inside the event loop that uses it; `await pool.close()` after."""

    def __init__(self, dsn: str, size: int, acquire_timeout_s: float, statement_timeout_ms: int, log: StoreLog):
        self.dsn, self.size, self.acquire_timeout_s, self.log = dsn, size, acquire_timeout_s, log
        self.statement_timeout_ms = int(statement_timeout_ms)
        self._free: asyncio.Queue | None = None
        self._all: list = []

    async def open(self) -> "BoundedPool":
        import psycopg

        self._free = asyncio.Queue()
        try:
            for _ in range(self.size):
                con = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                self._all.append(con)
                await con.execute(f"SET statement_timeout = {self.statement_timeout_ms}")
                self._free.put_nowait(con)
        except BaseException:
            await self.close()
            raise
        return self

    @property
    def free(self) -> int:
        return self._free.qsize() if self._free else 0

    async def acquire(self):
        try:
            return self._free.get_nowait()
        except asyncio.QueueEmpty:
            pass
        if self.acquire_timeout_s <= 0:
            raise Refused()
        try:
            return await asyncio.wait_for(self._free.get(), self.acquire_timeout_s)
        except asyncio.TimeoutError:
            raise Refused() from None

    def release(self, con) -> None:
        cast(asyncio.Queue, self._free).put_nowait(con)  # a connection to release was acquired: open() ran

    async def close(self) -> None:
        for con in self._all:
            try:
                await con.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
        self._all = []


class Store:
    """Reads through the pool with the retry policy."""

    def __init__(self, pool: BoundedPool, query_s: float, retries: int, backoff_s: float):
        self.pool, self.query_s, self.retries, self.backoff_s = pool, query_s, retries, backoff_s

    async def read(self, key: int, slot: int) -> tuple[bytes | None, int]:
        """(the value of `key` or None when every attempt timed out or was refused, attempts made)."""
        import psycopg

        log = self.pool.log
        for attempt in range(1 + self.retries):
            if attempt:
                await asyncio.sleep(self.backoff_s)
            t = time.monotonic()
            try:
                con = await self.pool.acquire()
            except Refused:
                log.add("refused", (t, slot))
                continue
            t_got = time.monotonic()
            log.add("queries", (t_got, slot))
            try:
                cur = await con.execute("SELECT value, pg_sleep(%s) FROM kv WHERE id = %s", (self.query_s, key))
                row = await cur.fetchone()
                return bytes(row[0]), attempt + 1
            except psycopg.errors.QueryCanceled:
                log.add("timeouts", (t_got, slot))
            finally:
                log.add("busy", (t_got, time.monotonic()))
                self.pool.release(con)
        log.add("failed", (time.monotonic(), slot))
        return None, 1 + self.retries


def load_table(dsn: str, ids, value_bytes: int) -> int:
    """(Re)create table kv with one deterministic value of `value_bytes` per distinct id."""
    import hashlib

    import psycopg

    rows = []
    for i in sorted({int(x) for x in ids}):
        seed = hashlib.sha256(str(i).encode()).digest()
        rows.append((i, (seed * (value_bytes // len(seed) + 1))[:value_bytes]))
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS kv")
        con.execute("CREATE TABLE kv (id INTEGER PRIMARY KEY, value BYTEA NOT NULL)")
        with con.cursor() as cur, cur.copy("COPY kv (id, value) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
        con.execute("ANALYZE kv")
    return len(rows)
