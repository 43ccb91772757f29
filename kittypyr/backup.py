"""Backups of the embedded storage: repozo for ``Data.fs``, a copy of new files for the blobs.

A backup folder holds ``filestorage/`` (repozo's repository: a full backup,
then one increment per later run) and ``blobs/`` (every blob file ever
backed up). Blob files never change once written, so copying the ones the
backup lacks is an incremental backup of them. ``Data.fs`` is backed up
first: every blob its backup refers to is on disk by then and is copied
after it. repozo reads a FileStorage while it is being written, so a backup
needs no pause in service; a restore needs the storage closed.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from zc.lockfile import LockError, LockFile
from ZODB.blob import BLOB_SUFFIX, FilesystemHelper
from ZODB.FileStorage import FileStorage
from ZODB.POSException import POSKeyError

REPOZO = Path(sys.executable).with_name("repozo")


class BackupRefused(Exception):
    """Why a backup or restore cannot be made as asked: a sentence for the user."""


@dataclass
class FileStoragePaths:
    data_fs: Path
    blob_dir: Path | None


def file_storage_of(uri):
    """The ``Data.fs`` and blob folder a ``file://`` zodburi URI names; BackupRefused for others."""
    parts = urlsplit(uri)
    if parts.scheme in ("memory", "demo"):
        raise BackupRefused(f"the storage is {parts.scheme}://, kept in the process's memory only: there is"
                            " nothing to back up, nor anywhere to restore to")
    if parts.scheme != "file":
        raise BackupRefused(
            f"the storage is {parts.scheme}://, not an embedded FileStorage: back up the ZEO server's "
            "FileStorage with repozo where it runs, or a RelStorage database with pg_dump (see the README)")
    # As zodburi reads it: the path as written (relative to the working
    # folder when it does not start with /), not as a URL's.
    path, _, query = uri.split("file://", 1)[1].partition("?")
    blob_dir = dict(parse_qsl(query)).get("blobstorage_dir")
    return FileStoragePaths(Path(os.path.normpath(path)), Path(blob_dir) if blob_dir else None)


def blobs_without_storage(uri):
    """Why the storage ``uri`` names must not be made anew, or None: its blob folder holds an archive's attachments.

    A ``file://`` storage whose ``Data.fs`` is missing while its blob folder
    holds blobs (``Data.fs`` moved away before a restore, a slip in
    zodbconn.uri) would otherwise be created empty, and its first pack
    would delete every blob that empty storage does not know.
    """
    try:
        paths = file_storage_of(uri)
    except BackupRefused:
        return None
    if paths.blob_dir is None or paths.data_fs.exists() or not paths.blob_dir.is_dir():
        return None
    if not any(name.endswith(".blob") for _, _, names in os.walk(paths.blob_dir) for name in names):
        return None
    return (f"{paths.blob_dir} holds the attachments of an archive, but {paths.data_fs} does not exist: put that "
            "archive's Data.fs back, restore it (kittypyr restore), or correct zodbconn.uri; a new, empty storage "
            "there would delete those attachments at its first pack")


def _repozo(*args):
    result = subprocess.run([str(REPOZO), *args], capture_output=True, text=True)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip()
        # A Python traceback's last line says what went wrong.
        refused = BackupRefused(f"repozo failed: {said.splitlines()[-1] if said else result.returncode}")
        refused.detail = said.splitlines()[-1] if said else f"exit status {result.returncode}"
        raise refused
    return result


def _missing_from_chain(repository, date=None):
    """The name of a file a restore as of ``date`` reads that is not in ``repository``, or None.

    repozo restores from the files it finds, by their names: without one
    of its increments it would write a broken storage, or an older state,
    and say nothing. Each full backup's ``.dat`` lists its increments.
    """
    # Names compare as text, as repozo compares them with --date.
    listings = [path for path in sorted(repository.glob("*.dat")) if date is None or path.stem <= date]
    if not listings:
        return None
    for line in listings[-1].read_text().splitlines():
        fields = line.split()
        if not fields:
            continue
        name = Path(fields[0]).name
        if date is not None and Path(name).stem > date:
            break
        if not (repository / name).exists():
            return name
    return None


def _blob_files(folder):
    """Paths of ``folder``'s blob files and layout marker, relative to it; never its scratch files."""
    for directory, subdirectories, files in os.walk(folder):
        relative = Path(directory).relative_to(folder)
        if relative == Path("."):
            # tmp/ holds uncommitted blobs; the lock belongs to the open storage.
            subdirectories[:] = [d for d in subdirectories if d != "tmp"]
        for name in files:
            if name.endswith((".lock", ".partial")):
                continue  # the open storage's; a copy an interrupted run left unfinished
            yield relative / name


def _copy_new(source, target, wanted=None):
    """Copy the files of ``source`` that ``target`` lacks (or holds at another size); return how many.

    ``wanted``: a test of each file's path (relative to ``source``), when not all are to be copied.
    """
    copied = 0
    for relative in _blob_files(source):
        if wanted is not None and not wanted(relative):
            continue
        into = target / relative
        origin = source / relative
        if into.exists() and into.stat().st_size == origin.stat().st_size:
            continue
        into.parent.mkdir(parents=True, exist_ok=True)
        # Through a temporary name, so an interrupted copy never looks complete.
        partial = into.with_name(into.name + ".partial")
        shutil.copy2(origin, partial)
        os.replace(partial, into)
        copied += 1
    return copied


def _copy_held(source, target, data_fs):
    """Copy the blob files of ``source`` whose revision the storage ``data_fs`` holds; return how many.

    A backup folder keeps every blob file it was ever given: those of mail
    deleted and packed away since, and those newer than a restore's date,
    are not brought back.
    """
    storage = FileStorage(str(data_fs), read_only=True)
    names = FilesystemHelper(str(source))

    def held(relative):
        if relative.suffix != BLOB_SUFFIX:
            return True  # the layout's marker
        oid, serial = names.splitBlobFilename(str(source / relative))
        try:
            return oid is not None and bool(storage.loadSerial(oid, serial))
        except (POSKeyError, KeyError):
            return False

    try:
        return _copy_new(source, target, held)
    finally:
        storage.close()


def _backup_repository(folder):
    """``folder/filestorage``, made where missing; BackupRefused when ``folder`` cannot hold a backup.

    A folder that already holds other things is refused: the backup would
    be mixed into them, and removing an old backup would remove them too.
    """
    repository = folder / "filestorage"
    if folder.exists() and not folder.is_dir():
        raise BackupRefused(f"{folder} is a file: give a folder to back up into")
    if folder.is_dir() and not repository.is_dir() and any(folder.iterdir()):
        raise BackupRefused(f"{folder} holds other files and no backup: back up into a new or empty folder, "
                            "or into the folder of the earlier backups")
    try:
        repository.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupRefused(f"cannot make {repository} ({exc.strerror}): give a folder this user can write to")
    if not os.access(repository, os.W_OK):
        raise BackupRefused(f"{repository} is not writable for this user: give a folder this user can write to")
    return repository


def backup(paths, folder, full=False):
    """Back up ``paths`` (FileStoragePaths) into ``folder``; return ``(kind, blobs copied)``.

    ``kind`` is "full" for the first backup (or ``full``), "incremental" after,
    "no new" when nothing was committed since the last one.
    """
    if not paths.data_fs.exists():
        raise BackupRefused(f"there is no storage at {paths.data_fs} to back up")
    if paths.blob_dir is None or not paths.blob_dir.is_dir():
        # The attachments would be left out while the backup said done.
        raise BackupRefused(_no_blob_folder(paths, "backed up"))
    target, blobs = Path(folder).resolve(), paths.blob_dir.resolve()
    if target == blobs or blobs in target.parents:
        # Each backup would copy the ones before it into itself.
        raise BackupRefused(f"{folder} is inside the blob folder {blobs}: back up into a folder elsewhere, best on"
                            " another disk")
    repository = _backup_repository(Path(folder))
    before = set(repository.iterdir())
    _repozo("-B", "-Q", "-z", "-r", str(repository), "-f", str(paths.data_fs), *(["-F"] if full else []))
    made = set(repository.iterdir()) - before
    if any(path.suffix in (".fs", ".fsz") for path in made):
        kind = "full"
    elif any(path.suffix in (".deltafs", ".deltafsz") for path in made):
        kind = "incremental"
    else:
        kind = "no new"  # nothing committed since the last backup
    return kind, _copy_new(paths.blob_dir, Path(folder) / "blobs")


def _no_blob_folder(paths, done):
    if paths.blob_dir is None:
        return (f"zodbconn.uri names no blob folder (blobstorage_dir), where an archive keeps its attachments:"
                f" they would not be {done}; add blobstorage_dir to it")
    return (f"the blob folder {paths.blob_dir} is not there, where zodbconn.uri says the archive keeps its"
            f" attachments: they would not be {done}; correct blobstorage_dir in zodbconn.uri")


def restore(paths, folder, date=None):
    """Restore the backup in ``folder`` into ``paths``, as of ``date`` (UTC ``yyyy-mm-dd[-hh[-mm[-ss]]]``).

    Refuses to overwrite an existing storage or one that is open. Returns
    the number of blob files restored.
    """
    repository = Path(folder) / "filestorage"
    if not repository.is_dir() or not any(repository.iterdir()):
        raise BackupRefused(f"there is no backup in {folder}")
    if paths.data_fs.exists():
        raise BackupRefused(f"{paths.data_fs} exists: move it away first (a restore never overwrites a storage)")
    first = min((path.stem for path in repository.iterdir() if path.suffix in (".fs", ".fsz")), default=None)
    if first is None:
        # Only what a backup writes before its first storage file (an index,
        # a temporary file): one that was interrupted.
        raise BackupRefused(f"{folder} holds no complete backup (an interrupted one?): run kittypyr backup into it"
                            " again, or give another folder")
    # repozo compares names and dates as text: a day alone is before any backup made that day.
    if date is not None and date < first:
        # repozo would say only "No files in repository before" the date.
        raise BackupRefused(f"the first backup in {folder} was made at {first} (UTC, yyyy-mm-dd-hh-mm-ss): "
                            f"give --date {first} or later")
    if paths.blob_dir is None and (Path(folder) / "blobs").is_dir():
        raise BackupRefused(_no_blob_folder(paths, "restored"))
    missing = _missing_from_chain(repository, date)
    if missing is not None:
        raise BackupRefused(f"{missing}, which the backup lists, is missing from {repository}: restore as of an "
                            "earlier date (--date), or from another backup")
    try:
        paths.data_fs.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackupRefused(f"cannot make the storage folder {paths.data_fs.parent} ({exc.strerror}): "
                            "correct zodbconn.uri, or give this user write access there")
    try:
        # Held while restoring, so that no server opens the half-written file.
        lock = LockFile(f"{paths.data_fs}.lock")
    except LockError:
        raise BackupRefused(f"{paths.data_fs} is in use by another process: stop the web server first")
    try:
        try:
            # Each file checked against the digest the backup noted of it.
            _repozo("-R", "--with-verify", "-r", str(repository), "-o", str(paths.data_fs),
                    *(["-D", date] if date else []))
        except BackupRefused as refused:
            lock.close()
            for partial in (paths.data_fs, *(paths.data_fs.with_name(paths.data_fs.name + end)
                                             for end in (".part", ".index", ".lock"))):
                partial.unlink(missing_ok=True)
            if " instead of " in refused.detail:  # repozo's word for a size or checksum that differs
                raise BackupRefused(f"the backup in {folder} does not hold what the backup wrote, and nothing was"
                                    " restored: restore as of an earlier date (--date), or from another backup"
                                    f" ({refused.detail})") from None
            raise BackupRefused(f"nothing was restored: {refused.detail}") from None
        restored = 0
        backed_up = Path(folder) / "blobs"
        if paths.blob_dir is not None and backed_up.is_dir():
            restored = _copy_held(backed_up, paths.blob_dir, paths.data_fs)
    finally:
        lock.close()
    return restored
