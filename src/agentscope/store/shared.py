"""One store file, many processes (DESIGN §11): short writes, snapshot reads, a spool for the rest.

DuckDB lets one process open a file for writing at a time, and a writer also
shuts out readers.  So every agentscope process coordinates through an advisory
lock file beside the store (``agentscope.duckdb.lock``, POSIX ``flock``):

- a **writer** takes the lock exclusively for one write — open, load any spilled
  batches, insert, close (DuckDB checkpoints on close) — and gives it back;
- a **reader** takes it shared only while it copies the file to a private
  snapshot (waiting at most ``READ_WAIT_S`` for a writer's one write), then
  reads the snapshot for as long as it likes;
- a writer that cannot get the file in time keeps its batch, or **spills** it to
  the spool folder beside the store (``agentscope.duckdb.spool/``) as an Arrow
  file written to a temporary name, fsynced and renamed, so a spilled batch is
  whole or absent.  The next writer that gets the file loads the spool first.
  Loading is ``INSERT OR IGNORE``, so a batch loaded twice (its writer killed
  between the insert and the unlink) is stored once.

A process that is killed holds nothing: the kernel drops its ``flock``, and
DuckDB replays its write-ahead log on the next open.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa
import pyarrow.ipc as ipc

from agentscope.store.schema import SCHEMA_VERSION
from agentscope.store.store import Inserted, Store, StoreError, connect, quoted_path

T = TypeVar("T")

READ_WAIT_S = 2.0
"""How long a reader waits for a writer's write before it copies the file without the lock."""
SPOOL_FILES_PER_WRITE = 64
"""Spilled batches loaded by one write at most, so that one write stays short."""


class StoreBusy(StoreError):
    """The store was held by others for longer than this caller would wait."""

    def __init__(self, message: str, foreign: bool = False) -> None:
        super().__init__(message)
        self.foreign = foreign
        """Held by a program outside this protocol (DuckDB's own lock), not by another agentscope writer."""


class StoreUnwritable(StoreError):
    """The store's folder cannot be written: it does not exist, or this process may not write there."""


class SharedStore:
    """A store file used by many processes at once; see the module docstring for the protocol."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.turn_path = self.path.with_name(self.path.name + ".lock.queue")
        self.spool_dir = self.path.with_name(self.path.name + ".spool")
        self._held: _Held | None = None

    # -- the lock -------------------------------------------------------------

    @contextmanager
    def _locked(self, exclusive: bool, timeout_s: float) -> Iterator[bool]:
        """Hold the lock file; yields False, holding nothing, where it cannot be made (read-only folder).

        Waiters queue through a turnstile (a second lock file, held only while
        waiting), so a reader is not starved by writers that take the lock back
        one after another: it waits about one write, not for the writers to pause.
        """
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            if exclusive:
                raise self._unwritable(exc) from None
            yield False
            return
        try:
            deadline = time.monotonic() + timeout_s
            turn = os.open(self.turn_path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                self._acquire(turn, fcntl.LOCK_EX, deadline)
                try:
                    self._acquire(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline)
                finally:
                    fcntl.flock(turn, fcntl.LOCK_UN)
            finally:
                os.close(turn)
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _unwritable(self, exc: OSError) -> StoreUnwritable:
        """Why the store's lock file cannot be made, said of the store and its folder."""
        folder = self.path.parent
        if not folder.is_dir():
            why = f"the folder {folder} does not exist"
        else:
            why = f"its folder {folder} cannot be written ({exc.strerror or exc})"
        return StoreUnwritable(f"cannot write store {self.path}: {why}")

    def _acquire(self, fd: int, mode: int, deadline: float) -> None:
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreBusy(f"store {self.path} is being written by another process") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.02)

    # -- writing --------------------------------------------------------------

    def queued(self) -> bool:
        """Whether another process (or thread) is waiting for the store right now."""
        try:
            fd = os.open(self.turn_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    @contextmanager
    def holding(self, timeout_s: float = 30.0) -> Iterator[None]:
        """Keep the file from one write to the next for a run of writes (an ingest's batches),
        giving it up after any write during which another process queued for it.

        Inside the block every write of this object uses the held file; each still
        lands whole, and nobody waits for more than about one write.
        """
        self._held = _Held(self, timeout_s)
        try:
            yield
        finally:
            held, self._held = self._held, None
            held.release()

    @contextmanager
    def writing(self, timeout_s: float = 30.0) -> Iterator[Store]:
        """The store open for one write, spilled batches loaded first; StoreBusy after ``timeout_s``."""
        if self._held is not None:
            store = self._held.acquire()
            try:
                yield store
            except BaseException:
                self._held.release()
                raise
            if self.queued():
                self._held.release()
            return
        deadline = time.monotonic() + timeout_s
        with self._locked(True, timeout_s):
            store = self._open(deadline)
            try:
                self._load_spool(store)
                yield store
            finally:
                store.close()

    def _open(self, deadline: float) -> Store:
        """Open for writing, retrying until ``deadline`` while a program outside this protocol
        (a DuckDB shell, say) holds DuckDB's own lock on the file."""
        while True:
            try:
                return Store(self.path)
            except StoreError as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() >= deadline:
                    raise self._foreign(exc) from None
                time.sleep(0.02)

    def insert(self, batch: pa.Table, timeout_s: float = 30.0) -> Inserted:
        """Store one batch in one write (waiting at most ``timeout_s`` for the file)."""
        with self.writing(timeout_s) as store:
            return store.insert(batch)

    def merge(self, other: Path, timeout_s: float = 30.0) -> tuple[int, int, list[str]]:
        """Merge another store file in one write: (spans read, spans added, its trace ids)."""
        with self.writing(timeout_s) as store:
            return store.merge(other)

    def count_tasks(self, trace_ids: list[str], timeout_s: float = 30.0) -> int:
        """:meth:`Store.count_tasks` in one short hold of the file."""
        with self.writing(timeout_s) as store:
            return store.count_tasks(trace_ids)

    def prune(self, before_ns: int, compact: bool = False, timeout_s: float = 30.0) -> tuple[int, int]:
        """Delete the traces that ended before ``before_ns`` (:meth:`Store.prune`) in one write:
        (traces, spans) deleted.  With ``compact``, the file is then rewritten without the space they
        held, which DuckDB otherwise keeps (and reuses) — the file is held for the whole copy."""
        with self._locked(True, timeout_s):
            store = self._open(time.monotonic() + timeout_s)
            try:
                self._load_spool(store)
                pruned = store.prune(before_ns)
            finally:
                store.close()
            if compact:
                self._compact()
        return pruned

    def _compact(self) -> None:
        """Copy the store into a new file and put it in the old one's place (the lock held by the caller)."""
        fresh = self.path.with_name(self.path.name + ".compact")
        fresh.unlink(missing_ok=True)
        con = connect(":memory:")
        try:
            con.execute(f"ATTACH '{quoted_path(self.path)}' AS agentscope_old (READ_ONLY)")
            con.execute(f"ATTACH '{quoted_path(fresh)}' AS agentscope_fresh")
            con.execute("COPY FROM DATABASE agentscope_old TO agentscope_fresh")
        except BaseException:
            con.close()
            fresh.unlink(missing_ok=True)
            raise
        con.close()
        with fresh.open("rb+") as handle:
            os.fsync(handle.fileno())
        fresh.replace(self.path)

    # -- the spool ------------------------------------------------------------

    def spill(self, batch: pa.Table) -> None:
        """Write a batch to the spool, whole or not at all (OSError when the disk is full or read-only)."""
        self.spool_dir.mkdir(exist_ok=True)
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.arrow"
        temporary = self.spool_dir / f".{name}.tmp"
        try:
            with temporary.open("wb") as handle:
                with ipc.new_file(handle, batch.schema) as writer:
                    writer.write_table(batch)
                handle.flush()
                os.fsync(handle.fileno())
            temporary.rename(self.spool_dir / name)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        directory = os.open(self.spool_dir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def spooled(self) -> list[Path]:
        """Spilled batches waiting to be loaded, oldest first."""
        if not self.spool_dir.is_dir():
            return []
        return sorted(self.spool_dir.glob("*.arrow"))

    def _load_spool(self, store: Store) -> None:
        for path in self.spooled()[:SPOOL_FILES_PER_WRITE]:
            try:
                with ipc.open_file(path) as reader:
                    table = reader.read_all()
            except (OSError, pa.ArrowInvalid):
                path.rename(path.with_suffix(".unreadable"))  # kept for a person to look at, not retried
                continue
            store.insert(table)
            path.unlink()

    # -- reading --------------------------------------------------------------

    def read(self, fn: Callable[[Store], T], wait_s: float = READ_WAIT_S) -> T:
        """``fn(store)`` on the file itself, opened read-only under the shared lock: nothing is copied.

        Writers keep or spill their batches while ``fn`` runs, so ``fn`` should read what it needs and
        return.  A reader sees every span flushed before it started, so spilled batches are loaded into
        the file first (a write), and a store of an older schema is migrated (a write).  StoreBusy when
        the file cannot be had within ``wait_s`` (:meth:`reading`, which copies, still can be).
        """
        if not self.path.exists():
            raise StoreError(f"store {self.path} does not exist")
        deadline = time.monotonic() + wait_s
        while self.spooled():
            with self.writing(max(deadline - time.monotonic(), 0.0)):
                pass  # a write loads the spool first
        for _ in range(2):
            with self._locked(False, max(deadline - time.monotonic(), 0.0)):
                store = self._open_read_only()
                try:
                    if store.version >= SCHEMA_VERSION:
                        return fn(store)
                finally:
                    store.close()
            with self.writing(max(deadline - time.monotonic(), 0.0)):
                pass  # opened for writing, a store of an older schema is migrated
        raise StoreError(f"store {self.path} could not be migrated to schema version {SCHEMA_VERSION}")

    def answer(self, fn: Callable[[Store], T]) -> T:
        """``fn(store)`` on the file itself (:meth:`read`), or on a snapshot while the file is busy."""
        try:
            return self.read(fn)
        except StoreBusy:
            with self.reading() as store:
                return fn(store)

    def trace_count(self) -> int:
        """Traces in the store."""
        return self.answer(Store.trace_count)

    def _open_read_only(self) -> Store:
        try:
            return Store(self.path, read_only=True)
        except StoreError as exc:
            if "lock" in str(exc).lower():
                raise self._foreign(exc) from None
            raise

    def _foreign(self, exc: StoreError) -> StoreBusy:
        """DuckDB's own lock on the file, held by a program outside this protocol (a DuckDB shell, say)."""
        return StoreBusy(f"store {self.path} is held by another program: {exc}", foreign=True)

    @contextmanager
    def reading(self, wait_s: float = READ_WAIT_S) -> Iterator[Store]:
        """A read-only snapshot holding every span committed or spilled before the call.

        The file (with its write-ahead log, after a killed writer) and the spool
        are copied while the lock is held shared, which waits at most ``wait_s``
        for a writer's one write; past that they are copied as they stand on
        disk, which is the last completed write.  Spilled batches are applied to
        the snapshot only (loading them into the store is a writer's job).  The
        snapshot is deleted when the block ends.
        """
        if not self.path.exists():
            raise StoreError(f"store {self.path} does not exist")
        folder = Path(tempfile.mkdtemp(prefix="agentscope-snapshot-"))
        try:
            copy = folder / self.path.name
            try:
                with self._locked(False, wait_s):
                    spooled = self._copy_to(copy)
            except StoreBusy:
                spooled = self._copy_to(copy)
            store = self._open_snapshot(copy, spooled)
            store.path = self.path  # what readers report is the store, not its snapshot
            try:
                yield store
            finally:
                store.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _copy_to(self, copy: Path) -> list[pa.Table]:
        """Copy the file and its log to ``copy``; the spilled batches, read."""
        shutil.copyfile(self.path, copy)
        wal = self.path.with_name(self.path.name + ".wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        tables = []
        for path in self.spooled():
            try:
                with ipc.open_file(path) as reader:
                    tables.append(reader.read_all())
            except (OSError, pa.ArrowInvalid):  # loaded and removed meanwhile, or unreadable
                continue
        return tables

    def _open_snapshot(self, copy: Path, spooled: list[pa.Table]) -> Store:
        wal = copy.with_name(copy.name + ".wal")
        try:
            if not spooled and not wal.exists():
                return Store(copy, read_only=True)
            store = Store(copy)  # replays a killed writer's log; takes the spilled batches
            for table in spooled:
                store.insert(table)
            return store
        except (StoreError, duckdb.Error) as exc:  # name the store, not its snapshot
            raise StoreError(str(exc).replace(str(copy), str(self.path))) from exc


class _Held:
    """The file kept open between the writes of :meth:`SharedStore.holding`."""

    def __init__(self, shared: SharedStore, timeout_s: float) -> None:
        self.shared = shared
        self.timeout_s = timeout_s
        self._session: ExitStack | None = None
        self._store: Store | None = None

    def acquire(self) -> Store:
        """The held store, opened for the run's writes on one thread (:meth:`Store.one_thread`)."""
        if self._store is None:
            self.shared._held, held = None, self.shared._held  # a plain write while taking the file
            try:
                with ExitStack() as session:
                    store = session.enter_context(self.shared.writing(self.timeout_s))
                    session.enter_context(store.one_thread())
                    self._session, self._store = session.pop_all(), store
            finally:
                self.shared._held = held
        return self._store

    def release(self) -> None:
        session, self._session, self._store = self._session, None, None
        if session is not None:
            session.close()
