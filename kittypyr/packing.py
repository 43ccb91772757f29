"""Packing the storage: from the command line, or from the web server while it serves.

A removal request is done only once the storage is packed: until then the
deleted message's bytes stay in old revisions of the storage's files.
``kittypyr pack`` needs the embedded storage to itself, so the web server
must stop for it; a site administrator can pack from the administration
page instead (``POST /admin/pack``), in a thread of the server's own
process, which goes on serving meanwhile (a FileStorage, a ZEO server and
RelStorage all pack while in use).
"""

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import transaction
from ZODB.blob import BlobStorage
from ZODB.FileStorage import FileStorage
from ZODB.POSException import ConflictError

from kittypyr.bootstrap import ROOT_KEY

log = logging.getLogger(__name__)


def pack_storage(db, days=0):
    """Pack ``db``, keeping ``days`` of history; return its size before and after.

    A FileStorage would keep the file it packed away (``Data.fs.old``) and
    the removed blobs (``blobs.old``): deleted mail would live on there, so
    neither is kept. A ZEO server packs as its own configuration says
    (``pack-keep-old false`` belongs in it).
    """
    storage = db.storage
    if isinstance(storage, FileStorage):
        storage.pack_keep_old = False
    before = db.getSize()
    # No history is older than 1970: a pack time before 1900 is no time a
    # storage can name ("year must be greater than 1900").
    with _blob_walk_between_commits(storage):
        db.pack(days=min(days, time.time() / 86400))
    # zodburi puts a FileStorage with blobs inside a BlobStorage, which
    # removes unused blobs itself but leaves the packed-away file behind.
    packed_away = f"{storage.getName()}.old"
    if getattr(storage, "pack_keep_old", False) and os.path.isfile(packed_away):
        os.remove(packed_away)
    _empty_scratch_file(storage)
    return before, db.getSize()


@contextlib.contextmanager
def _blob_walk_between_commits(storage):
    """Within the ``with``, a BlobStorage's pack walks its blob folder under the commit lock.

    zodburi puts a FileStorage with blobs inside a BlobStorage, whose pack
    removes each blob file whose revision it cannot load. A commit under
    way has written its blob file and not yet its record: packing while
    the server archives, the walk removed the file of a message being
    archived, which then committed without its attachment. Held, the lock
    makes commits wait for the walk (seconds), not for the whole pack.
    """
    walk = getattr(storage, "_packUndoing", None)
    lock = getattr(storage, "_commit_lock", None)
    if not isinstance(storage, BlobStorage) or walk is None or lock is None:
        yield
        return

    def between_commits(packtime, referencesf):
        with lock:
            walk(packtime, referencesf)

    storage._packUndoing = between_commits
    try:
        yield
    finally:
        del storage._packUndoing


def _empty_scratch_file(storage):
    """Empty an open FileStorage's scratch file (``Data.fs.tmp``), also inside a BlobStorage.

    Each commit writes its records there first, over the last one's: past
    the end of a small commit lie the bytes of a larger one before it,
    deleted mail among them, until the storage is closed. Emptied between
    two commits (under the storage's commit lock), it holds none.
    """
    scratch = getattr(storage, "_tfile", None)
    lock = getattr(storage, "_commit_lock", None)
    if scratch is None or lock is None:
        return
    with lock:
        scratch.seek(0)
        scratch.truncate()


@dataclass(frozen=True)
class PackResult:
    finished: datetime
    before: int = 0
    after: int = 0
    error: str = ""


class StoragePacker:
    """Packs this process's database in a thread of its own, one pack at a time; keeps what the last one did."""

    def __init__(self):
        self._lock = threading.Lock()
        self.started = None  # when the pack running now began
        self.last = None  # the last finished pack's PackResult

    def start(self, db):
        """Begin packing ``db``; False if a pack is running already."""
        with self._lock:
            if self.started is not None:
                return False
            self.started = datetime.now(timezone.utc)
        threading.Thread(target=self._pack, args=(db,), name="kittypyr-pack", daemon=True).start()
        return True

    def _pack(self, db):
        try:
            before, after = pack_storage(db)
            result = PackResult(datetime.now(timezone.utc), before, after)
            log.info("storage packed: %d bytes before, %d after", before, after)
        except Exception as exc:
            # Answered on the administration page; the server goes on.
            log.exception("packing the storage failed")
            result = PackResult(datetime.now(timezone.utc), error=f"{type(exc).__name__}: {exc}")
        with self._lock:
            self.last, self.started = result, None


def storage_packer(registry):
    return registry.kittypyr_storage_packer


def note_packed(archive, when=None):
    """Record on ``archive`` that a pack was started now: the schedule counts from it."""
    archive.packed_at = when or datetime.now(timezone.utc)


# How often a server looks whether a scheduled pack is due, at most.
SCHEDULE_LOOK_SECONDS = 3600


class PackSchedule:
    """Packs the storage every ``every`` (a timedelta), from one of the processes that serve it.

    Each serving process looks now and then; the first to find the last
    pack (``Archive.packed_at``, which every pack sets) older than
    ``every`` claims the next one by committing the time, and packs. The
    others' claims conflict with it, and they find it done when they look
    again.
    """

    def __init__(self, db, packer, every):
        self.db = db
        self.packer = packer
        self.every = every

    def start(self):
        look = min(self.every.total_seconds() / 10, SCHEDULE_LOOK_SECONDS)
        threading.Thread(target=self._run, args=(look,), name="kittypyr-pack-schedule", daemon=True).start()

    def _run(self, look):
        while True:
            time.sleep(look)
            if _closed(self.db):
                return  # the application's end
            try:
                if self.claim():
                    self.packer.start(self.db)
            except Exception as exc:
                # A storage away for a while: the next look tries again.
                log.warning("could not look whether a scheduled pack is due: %r", exc)

    def claim(self, now=None):
        """Whether a pack is due and this process is the one to do it."""
        now = now or datetime.now(timezone.utc)
        manager = transaction.TransactionManager()
        connection = self.db.open(transaction_manager=manager)
        try:
            archive = connection.root().get(ROOT_KEY)
            if archive is None:
                return False
            packed_at = archive.packed_at
            due = packed_at is not None and now - packed_at >= self.every
            # The first look sets the clock going: a new site packs a period after it started.
            if packed_at is None or due:
                note_packed(archive, now)
                manager.commit()
            return due
        except ConflictError:  # another process claimed it first
            return False
        finally:
            manager.abort()
            connection.close()


def _closed(db):
    # ZODB's DB lets go of its storage's adapter when it is closed.
    return not hasattr(db, "_mvcc_storage")


def start_pack_schedule(registry):
    """Start packing on the schedule ``kittypyr.pack_every_days`` sets (0 or unset: never), in a serving process."""
    days = float(registry.settings.get("kittypyr.pack_every_days") or 0)
    databases = getattr(registry, "_zodb_databases", {})
    if days <= 0 or "" not in databases:
        return None
    schedule = PackSchedule(databases[""], storage_packer(registry), timedelta(days=days))
    schedule.start()
    return schedule


def includeme(config):
    config.registry.kittypyr_storage_packer = StoragePacker()
