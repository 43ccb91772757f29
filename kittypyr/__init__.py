"""kittypyr: the web archive of GNU Mailman 3 mailing lists."""

import atexit
import os
import signal
import threading
import warnings
import weakref

# Pyramid 2 imports pkg_resources, which then warns at every start that it
# is deprecated: nothing anyone running kittypyr can act on (setup.py pins
# setuptools below the release that drops it).
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

from pyramid.config import Configurator
from pyramid.scripting import prepare
from pyramid.settings import asbool, aslist
from ZODB.POSException import ConflictError
from zc.lockfile import LockError
from zodburi import NoResolverForScheme

PARTS = (
    "kittypyr.site_address",
    "kittypyr.templating",
    "kittypyr.resources",
    "kittypyr.retries",
    "kittypyr.placeholders",
    "kittypyr.archived_check",
    "kittypyr.security",
    "kittypyr.mailman",
    "kittypyr.standalone",
    "kittypyr.catalog",
    "kittypyr.stats",
    "kittypyr.search",
    "kittypyr.people",
    "kittypyr.votes",
    "kittypyr.tags",
    "kittypyr.exports",
    "kittypyr.pipermail",
    "kittypyr.feeds",
    "kittypyr.htmlview",
    "kittypyr.packing",
    "kittypyr.views",
)


# Whether applications made in this process serve pages: kittypyr's
# commands set it False, as they open the application only for its storage
# (a scheduled pack, for one, belongs to the servers).
SERVING = True


def storage_unwritable(error):
    """How kittypyr says that writing to the storage failed with ``error`` (an OSError)."""
    where = f": {error.filename}" if error.filename else ""
    return f"the storage could not be written ({error.strerror or error}{where})"


def _is_storage_server_uri(uri):
    return uri.split(":", 1)[0].lower() in ("zeo", "postgres", "postgresql", "mysql", "oracle", "sqlite3")


def _server_named(uri):
    """``scheme://host:port`` of a storage URI: never its credentials."""
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    try:
        where = parts.hostname or ""
        if parts.port:
            where += f":{parts.port}"
    except ValueError:
        where = "?"
    return f"{parts.scheme}://{where}"


def _one_line(exc):
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"


class StorageUnopened(SystemExit):
    """The embedded storage cannot be opened: the server exits saying why and what to do."""


class StorageInUse(StorageUnopened):
    """The embedded storage is held by another process."""


def main(global_config, **settings):
    """Return the kittypyr WSGI application.

    Packages named in ``pyramid.includes`` are included after kittypyr's own
    parts, so that directives such as ``config.add_catalog_index`` exist
    when their ``includeme`` runs.
    """
    if SERVING:
        from kittypyr.memory import pin_mmap_threshold

        pin_mmap_threshold()
    extensions = aslist(settings.get("pyramid.includes", ""))
    with Configurator(settings=dict(settings, **{"pyramid.includes": ""})) as config:
        config.registry.settings["pyramid.includes"] = settings.get("pyramid.includes", "")
        config.include("pyramid_chameleon")
        config.include("pyramid_tm")
        config.include("pyramid_retry")
        from kittypyr.backup import blobs_without_storage

        orphaned = blobs_without_storage(settings.get("zodbconn.uri", ""))
        if orphaned is not None:
            raise StorageUnopened(f"kittypyr: {orphaned}.")
        try:
            config.include("pyramid_zodbconn")
        except LockError:
            # An embedded FileStorage is for one process: a second server
            # (or a command) on it cannot start, and should say why.
            raise StorageInUse(
                "kittypyr: the storage in zodbconn.uri is in use by another process (a server or a kittypyr "
                "command): stop that one first. To serve from several processes at once, use ZEO or "
                "RelStorage (README: 'Storage: one process or many').") from None
        except NoResolverForScheme:
            raise StorageUnopened(
                f"kittypyr: zodbconn.uri names no storage kittypyr can open ({settings.get('zodbconn.uri')!r}):"
                " correct it; it starts with file://, zeo:// or postgres:// (README: 'Storage: one process or"
                " many').") from None
        except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError) as exc:
            # An embedded storage whose folder is missing or not this user's.
            folder = os.path.dirname(exc.filename or "") or "its folder"
            if isinstance(exc, (IsADirectoryError, NotADirectoryError)) and os.path.exists(exc.filename or ""):
                advice = f"{exc.filename} is not what zodbconn.uri wants there: move it away"
            elif isinstance(exc, PermissionError) or os.path.isdir(folder):
                advice = f"run as the user that owns {folder}, give that user the right to write there,"
            else:
                advice = f"create its folder (mkdir -p {folder}), run as the user that owns it,"
            raise StorageUnopened(
                f"kittypyr: cannot open the storage in zodbconn.uri ({exc.strerror}: {exc.filename}): "
                f"{advice} or correct zodbconn.uri.") from None
        except Exception as exc:
            if not _is_storage_server_uri(settings.get("zodbconn.uri", "")):
                raise
            # A ZEO or PostgreSQL server that is down, or a URI it refuses.
            raise StorageUnopened(
                f"kittypyr: cannot open the storage in zodbconn.uri ({_server_named(settings['zodbconn.uri'])}): "
                f"{_one_line(exc)}. Check that its server runs and that the URI's host, port, database and "
                "credentials are right (README: 'Storage: one process or many').") from None
        for part in PARTS:
            config.include(part)
        for extension in extensions:
            config.include(extension)
        app = config.make_wsgi_app()
    _bootstrap_storage(app.registry)
    _close_storage_at_exit(app.registry)
    if SERVING:
        from kittypyr.packing import start_pack_schedule

        start_pack_schedule(app.registry)
    if asbool(settings.get("kittypyr.warm_up", False)):
        from kittypyr.warmup import warm_up

        warm_up(app, connections=int(settings.get("kittypyr.warm_up_connections", 1)))
    return app


# The databases of every application made in this process, closed as it exits.
_open_databases = weakref.WeakSet()


def _close_open_databases():
    for database in list(_open_databases):
        database.close()


atexit.register(_close_open_databases)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _close_storage_at_exit(registry):
    """Close the application's databases when the process exits, SIGTERM included.

    FileStorage saves its index of where each record lies only when it is
    closed; a server that systemd, Docker or a supervisor stopped with
    SIGTERM died without closing it, and its next start read every
    transaction written since the index was last saved (the whole file,
    from a first start). SIGTERM now ends the process as Ctrl-C does, by an
    exception that lets the server stop and ``atexit`` close the storage:
    only where nothing else took the signal (the server's own handler wins).
    """
    _open_databases.update(getattr(registry, "_zodb_databases", {}).values())
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _bootstrap_storage(registry, attempts=5):
    """Create or upgrade the archive once at start-up, not in a page view.

    Several processes may start at once against one ZEO server: the losers
    of that race retry and find the archive made. The archive's own
    secret is read then, for a site that leaves ``kittypyr.secret`` unset.
    """
    from kittypyr.security import adopt_archive_secret

    for attempt in range(attempts):
        with prepare(registry=registry) as env:
            try:
                env["request"].tm.commit()
                adopt_archive_secret(registry, env["root"])
                return
            except ConflictError:
                if attempt == attempts - 1:
                    raise
