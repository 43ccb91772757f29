"""A throwaway PostgreSQL cluster for RelStorage: Debian's server binaries, a temporary folder.

PostgreSQL refuses to run as root, so when the tests run as root every
command runs as the ``postgres`` user (``runuser``), in a folder that user
owns: the tests' own temporary folders are private to root. ``fsync`` is
off, as only a test cluster may have it.
"""

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.functional import free_port

DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin/initdb"


def server_binaries():
    """The folder of the newest installed PostgreSQL's programs; RuntimeError if there is none."""
    found = sorted(glob.glob(DEBIAN_BINARIES), key=lambda path: int(Path(path).parts[-3]))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: `make test` installs Debian's postgresql package")
    return Path(found[-1]).parent


class PostgreSQLServer:
    """One PostgreSQL cluster on loopback (``port``), started, stopped and restarted at will."""

    user = "postgres"

    def __init__(self, folder=None):
        """A cluster in a new temporary folder, removed at the end; or in ``folder``, kept (a benchmark's)."""
        self.bin = server_binaries()
        self.as_root = os.geteuid() == 0
        self.kept = folder is not None
        self.folder = Path(folder) if self.kept else Path(tempfile.mkdtemp(prefix="kittypyr-postgresql-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.data = self.folder / "data"
        self.run = self.folder / "run"
        self.log = self.run / "postgresql.log"
        self.port = free_port()
        self.initialised = (self.data / "PG_VERSION").exists()
        for folder in (self.data, self.run):
            folder.mkdir(exist_ok=True)
        if self.as_root:
            shutil.chown(self.folder, self.user, self.user)
            for folder in (self.data, self.run):
                shutil.chown(folder, self.user, self.user)
        self.databases = 0

    def _command(self, program, *args, timeout=120):
        command = [str(self.bin / program), *map(str, args)]
        if self.as_root:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout)

    def initialise(self):
        self._command("initdb", "-D", self.data, "-A", "trust", "-U", self.user, "--no-sync")

    def start(self):
        # synchronous_commit stays on: a commit answered is in the WAL
        # before the answer, as the restart tests count mail answered 200.
        options = (f"-p {self.port} -k {self.run} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c full_page_writes=off -c max_connections=200")
        self._command("pg_ctl", "-D", self.data, "-w", "-l", self.log, "-o", options, "start")

    def stop(self, mode="fast"):
        self._command("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def restart(self):
        self.stop()
        self.start()

    def create_database(self, name=None):
        """A new, empty database; returns its name."""
        if name is None:
            self.databases += 1
            name = f"zodb{self.databases}"
        self._command("createdb", "-h", "127.0.0.1", "-p", self.port, "-U", self.user, name)
        return name

    def uri(self, database, blob_cache, **options):
        """The zodburi URI of RelStorage on ``database``, blobs in the database and cached in ``blob_cache``."""
        query = "&".join(f"{key}={value}" for key, value in
                         {"blob_dir": blob_cache, "shared_blob_dir": "false", **options}.items())
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{database}?{query}"

    def has_database(self, name):
        listed = self._command("psql", "-h", "127.0.0.1", "-p", self.port, "-U", self.user, "-Atc",
                               f"SELECT 1 FROM pg_database WHERE datname = '{name}'", "postgres")
        return listed.stdout.strip() == "1"

    def copy_database(self, template, name):
        """A new database ``name`` made as a copy of ``template`` (no client may be connected to it)."""
        self._command("createdb", "-h", "127.0.0.1", "-p", self.port, "-U", self.user, "-T", template, name)
        return name

    def drop_database(self, name):
        self._command("dropdb", "-h", "127.0.0.1", "-p", self.port, "-U", self.user, "--if-exists", name)

    def remove(self):
        try:
            self.stop(mode="fast" if self.kept else "immediate")
        except subprocess.CalledProcessError:
            pass  # not running
        if not self.kept:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        try:
            if not self.initialised:
                self.initialise()
            self.start()
        except BaseException:
            if not self.kept:
                shutil.rmtree(self.folder, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc):
        self.remove()
