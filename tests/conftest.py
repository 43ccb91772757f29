import pytest
import transaction
from pyramid import testing
from ZODB import DB
from ZODB.FileStorage import FileStorage

from kittypyr.bootstrap import bootstrap_archive


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
