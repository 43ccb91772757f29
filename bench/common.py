"""Shared set-up for the benchmarks: a fresh FileStorage with kittypyr's catalog."""

import contextlib
import os
import resource
import shutil
import tempfile
import threading
from pathlib import Path

import transaction
from pyramid.config import Configurator
from ZODB import DB
from ZODB.FileStorage import FileStorage

from kittypyr import PARTS
from kittypyr.bootstrap import bootstrap_archive
from kittypyr.placeholders import ARCHIVER_SETTING as ARCHIVER_PLACEHOLDERS_SETTING  # noqa: F401 (archive_cost)
from kittypyr.placeholders import SETTING as PLACEHOLDERS_SETTING

WEB_PARTS = ("kittypyr.retries", "kittypyr.security", "kittypyr.mailman", "kittypyr.views")


class FreshArchive:
    """An archive in a new temporary FileStorage, with the subscribers that keep its data active."""

    def __init__(self, folder=None, cache_size=20000):
        # A folder made here is removed by close(); one given is kept.
        self.temporary = folder is None
        self.folder = Path(folder or tempfile.mkdtemp(prefix="kittypyr-bench-"))
        self.data_fs = self.folder / "Data.fs"
        self.blobs = self.folder / "blobs"
        self.config = Configurator(settings={})
        # Everything that keeps data in step as mail arrives (catalog,
        # statistics, profiles...), as `kittypyr import` has it; not the web.
        for part in PARTS:
            if part not in WEB_PARTS:
                self.config.include(part)
        self.config.commit()
        self.config.begin()
        self.db = DB(FileStorage(str(self.data_fs), blob_dir=str(self.blobs)), cache_size=cache_size)
        self.connection = self.db.open()
        self.archive = bootstrap_archive(self.connection.root(), self.config.registry)
        transaction.commit()

    def pack(self):
        self.db.pack()

    def close(self):
        transaction.abort()
        self.connection.close()
        self.db.close()
        self.config.end()
        if self.temporary:
            shutil.rmtree(self.folder, ignore_errors=True)

    def storage_bytes(self):
        """(Data.fs bytes, blob bytes as stored, blob bytes on disk)."""
        blob_bytes = blob_disk = 0
        for root, _, files in os.walk(self.blobs):
            for name in files:
                stat = os.stat(os.path.join(root, name))
                blob_bytes += stat.st_size
                blob_disk += stat.st_blocks * 512
        return self.data_fs.stat().st_size, blob_bytes, blob_disk


def production_cache():
    """The connection cache settings of production.ini's ``zodbconn.uri``, as a query string.

    What a benchmark of a serving process adds to its own storage's URI, so
    that it measures the cache sites run with.
    """
    import configparser
    import urllib.parse

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(Path(__file__).resolve().parent.parent / "production.ini")
    query = urllib.parse.urlsplit(parser["app:main"]["zodbconn.uri"]).query
    return "&".join(f"{name}={value}" for name, value in urllib.parse.parse_qsl(query)
                    if name.startswith("connection_cache"))


def add_placeholders_option(parser, flag="--placeholders-max", setting=PLACEHOLDERS_SETTING):
    """``--placeholders-max N`` (or ``flag``): the bound ``setting`` a benchmark's server keeps placeholders within.

    PLACEHOLDERS_SETTING bounds the connections serving pages,
    ARCHIVER_PLACEHOLDERS_SETTING those of Mailman's archiver API.
    """
    parser.add_argument(flag, type=int,
                        help=f"{setting} to serve with (kittypyr's default unless given; 0: no bound)")


def placeholders_line(bound, setting=PLACEHOLDERS_SETTING):
    """The .ini line that sets the placeholder bound ``setting`` to ``bound``; empty for None (kittypyr's default)."""
    return "" if bound is None else f"{setting} = {bound}"


def serving_config(folder, port=None, cache=None, extra=""):
    """Write ``folder``'s kittypyr.ini for serving its archive (``folder/var``) with ``cache`` (production.ini's)."""
    from tests.functional import write_config

    var = Path(folder).resolve() / "var"
    settings = production_cache() if cache is None else cache
    return write_config(folder, uri=f"file://{var}/Data.fs?blobstorage_dir={var}/blobs&{settings}", port=port,
                        extra=extra)


def process_memory_mb(pid, field="VmRSS"):
    """A field of ``/proc/PID/status`` in MB (``VmRSS`` now, ``VmHWM`` its peak); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children_of(pid):
    """The pids of the processes ``pid`` started that still run (read from each ``/proc/PID/stat``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # The command's name, in parentheses, may hold spaces: the parent's pid follows its last ")".
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found.append(int(entry))
    return found


class PeakWatch:
    """The peak RSS of a running process and of the largest of its children, sampled.

    Not wait4's ``ru_maxrss``: a process started by fork or vfork and exec
    keeps as its own peak what its parent held when it started (the whole
    corpus, for bench/scale.py), so a child's figure from it says nothing
    of the child. Each process's own high-water mark (``VmHWM``) is read
    instead, on every ``sample()``, for as long as it runs.
    """

    def __init__(self, pid):
        self.pid = pid
        self.own = 0.0
        self.children = {}

    def sample(self):
        self.own = max(self.own, process_memory_mb(self.pid, "VmHWM"))
        for child in children_of(self.pid):
            peak = process_memory_mb(child, "VmHWM")
            self.children[child] = max(self.children.get(child, 0.0), peak)

    @property
    def largest_child(self):
        return max(self.children.values(), default=0.0)

    @contextlib.contextmanager
    def sampling(self, every=0.2):
        """Sample from a thread of this process, every ``every`` seconds, while the block runs."""
        stop = threading.Event()

        def run():
            while not stop.wait(every):
                self.sample()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            self.sample()


def cpu_seconds():
    """CPU time (user and system) of this process and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def raw_mail_bytes(report_paths):
    """Total bytes of the mail as read (uncompressed)."""
    from kittypyr.mailboxes import read_mail

    return sum(len(m.raw) for path in report_paths for m in read_mail(path))


@contextlib.contextmanager
def served_archive(data, corpus, list_address, prefix, before_serving=None):
    """An archive of ``corpus`` in ``data`` (imported unless already there), served by pserve.

    Yields ``(config, port, server process, what before_serving(config) returned)``.
    ``before_serving`` runs while no server holds the storage (it is locked
    while a process has it open).
    """
    import subprocess

    from tests.functional import VENV_BIN, free_port, kittypyr, wait_for_port

    folder = Path(data or tempfile.mkdtemp(prefix=prefix))
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = serving_config(folder, port=port)
    if not (folder / "var" / "Data.fs").exists():
        print(f"importing {corpus} ...", flush=True)
        kittypyr("import", config, list_address, corpus, "--quiet", check=True, timeout=3600)
    prepared = before_serving(config) if before_serving is not None else None
    server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, timeout=300, process=server)
        yield config, port, server, prepared
    finally:
        server.terminate()
        server.wait(timeout=30)
    if not data:
        print(f"(archive left in {folder}; pass --data {folder} to reuse it)")
