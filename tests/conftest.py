import logging

import pytest
import transaction
from pyramid import testing
from ZODB import DB
from ZODB.FileStorage import FileStorage

from kittypyr.bootstrap import bootstrap_archive


@pytest.fixture(autouse=True)
def logging_as_it_was():
    """The commands run in-process set up logging from their .ini, to the
    stream pytest captured for that test: put the handlers back afterwards,
    or later tests log to a closed stream."""
    def every_logger():
        return [logging.root] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]

    saved = {logger: (logger.handlers[:], logger.level, logger.propagate, logger.disabled) for logger in every_logger()}
    yield
    for logger in every_logger():
        handlers, level, propagate, disabled = saved.get(logger, ([], logging.NOTSET, True, False))
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled


@pytest.fixture
def config():
    """A Pyramid configuration with kittypyr's catalog subscribers."""
    config = testing.setUp(settings={})
    config.include("kittypyr.catalog")
    config.commit()
    yield config
    testing.tearDown()


@pytest.fixture
def zodb(tmp_path):
    """A real FileStorage with blobs in a temporary folder."""
    storage = FileStorage(str(tmp_path / "Data.fs"), blob_dir=str(tmp_path / "blobs"))
    db = DB(storage)
    yield db
    transaction.abort()
    db.close()


@pytest.fixture
def archive(config, zodb):
    """An empty, bootstrapped Archive in an open connection."""
    connection = zodb.open()
    archive = bootstrap_archive(connection.root(), config.registry)
    transaction.commit()
    yield archive
    transaction.abort()
    connection.close()


@pytest.fixture(scope="session")
def mailman_stack(tmp_path_factory):
    """kittypyr, a real Mailman core and the site's SMTP server, started once a session."""
    from tests.mailman_stack import MailmanStack

    stack = MailmanStack(tmp_path_factory.mktemp("mailman-stack"))
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test of the Mailman stack carries what its servers logged.

    A wait that timed out says only that the page never came: the archive's
    and Mailman's logs say whether the mail arrived, was refused or held.
    """
    outcome = yield
    report = outcome.get_result()
    stack = getattr(item, "funcargs", {}).get("mailman_stack")
    if report.when != "call" or not report.failed or stack is None:
        return
    from kittypyr.suite.mailman_core import tail

    report.sections.append(("kittypyr's log", tail(stack.archive.log, 60)))
    report.sections.append(("Mailman core's logs", stack.core.logs_tail(60)))


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium, driven by Playwright, started once a session."""
    import os

    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is missing: `make test` installs Debian's chromium package")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def postgresql():
    """One PostgreSQL cluster of the tests' own (tests.postgresql_server), started once a session."""
    from tests.postgresql_server import PostgreSQLServer

    with PostgreSQLServer() as server:
        yield server


class SharedStorage:
    """A storage several processes share: ``kind`` is ``zeo`` or ``relstorage``.

    ``uri(folder)`` is the ``zodbconn.uri`` of one client (a process, an
    importer) whose blob cache is in ``folder``; ``open_db(folder)`` opens
    such a client in this process.
    """

    def __init__(self, kind, uri):
        self.kind = kind
        self._uri = uri

    def uri(self, folder):
        return self._uri(folder)

    def open_db(self, folder, **db_options):
        import zodburi
        from ZODB import DB

        factory, options = zodburi.resolve_uri(self.uri(folder))
        return DB(factory(), **{**options, **db_options})

    def catch_up(self, db):
        """Make ``db``'s next transaction see every commit made so far by any client.

        A ZEO client hears of other clients' commits asynchronously: a round
        trip to the server brings those sent before it. RelStorage asks
        PostgreSQL at the start of every transaction.
        """
        if self.kind == "zeo":
            db.storage.ping()


@pytest.fixture(params=["zeo", "relstorage"])
def shared_storage(request, tmp_path):
    """A new, empty shared storage: a ZEO server, or a database of the session's PostgreSQL."""
    if request.param == "zeo":
        from tests.functional import zeo_server_in

        folder = tmp_path / "zeo-server"
        folder.mkdir()
        with zeo_server_in(folder) as port:
            yield SharedStorage("zeo", lambda client: (
                f"zeo://127.0.0.1:{port}?storage=1&blob_dir={client}/blob-cache&shared_blob_dir=false"))
    else:
        server = request.getfixturevalue("postgresql")
        database = server.create_database()
        yield SharedStorage("relstorage", lambda client: server.uri(database, f"{client}/blob-cache"))
