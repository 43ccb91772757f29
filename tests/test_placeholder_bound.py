"""A serving connection keeps its placeholders within its kind's bound, and archiving keeps connections of its own."""

import contextlib
import shutil
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from kittypyr.placeholders import placeholders_in
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "big@lists.example.org"
KEY = "placeholders-key"
MESSAGES = 400
START = datetime(2020, 1, 1, tzinfo=timezone.utc)


def close(app):
    app.registry._zodb_databases[""].close()


@pytest.fixture(scope="module")
def archive_folder(tmp_path_factory):
    """An archive of 400 threads of one message each, over a year and more."""
    folder = tmp_path_factory.mktemp("placeholders")
    app = make_app(folder)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for n in range(MESSAGES):
            archive_message(mailing_list, make_message(
                message_id=f"<topic{n}@example.org>", subject=f"Topic number {n}",
                sender=(f"Writer {n % 7}", f"writer{n % 7}@example.org"),
                date=START + timedelta(days=n), body=f"Words about subject {n}, widget and gadget.\n"))
        transaction.commit()
    close(app)
    return folder


def pages():
    """(path, text it shows): months, messages and searches from all over the archive."""
    base = f"/list/{LIST}"
    for n in range(0, MESSAGES, 9):
        day = START + timedelta(days=n)
        yield f"{base}/{day.year}/{day.month}/", f"Topic number {n}"
        yield f"{base}/message/{message_id_hash(f'topic{n}@example.org')}/", f"Words about subject {n}"
        yield f"/search?q={n}&mlist={LIST}", f"Topic number {n}"


def most_placeholders(app, client=None):
    """Serve every page (checking it shows its text); the most placeholders a connection held after one."""
    client = client or TestApp(app)
    database = app.registry._zodb_databases[""]
    most = 0
    for path, text in pages():
        page = client.get(path, status=200)
        assert text in page.text, path
        most = max(most, max(placeholders_in(connection) for connection in database.pool.all))
    return most


@pytest.fixture
def archive_copy(archive_folder, tmp_path):
    """A copy of the 400-thread archive that the archiver API may add to."""
    copy = tmp_path / "archive"
    shutil.copytree(archive_folder, copy)
    return copy


def archive_through_the_api(client, n):
    """Post one new message as Mailman's plugin does; it must be stored (answered 200)."""
    raw = make_message(message_id=f"<posted{n}@example.org>", subject=f"Posted number {n}",
                       sender=("Poster", "poster@example.org"), date=START + timedelta(days=n, hours=1),
                       body=f"Posted words {n}, widget.\n")
    client.post("/api/mailman/archive", {"mlist": LIST}, headers={"Authorization": f"Token {KEY}"},
                upload_files=[("message", "message.txt", raw)], status=200)


@contextlib.contextmanager
def archiver_and_pages(folder, pages_max, archiver_max):
    """(app, its WebTest client) serving ``folder`` with those bounds and an archiver key."""
    app = make_app(folder, **{"kittypyr.connection_placeholders_max": str(pages_max),
                              "kittypyr.archiver_placeholders_max": str(archiver_max), "kittypyr.archiver_key": KEY})
    try:
        yield app, TestApp(app)
    finally:
        close(app)


def placeholders_by_connection(app):
    return sorted(placeholders_in(connection) for connection in app.registry._zodb_databases[""].pool.all)


def test_unbounded_the_pages_leave_more_placeholders_than_the_bound_tried(archive_folder):
    app = make_app(archive_folder, **{"kittypyr.connection_placeholders_max": "0"})
    try:
        assert most_placeholders(app) > 300
    finally:
        close(app)


def test_a_connection_keeps_no_more_placeholders_than_the_bound_and_pages_stay_right(archive_folder):
    app = make_app(archive_folder, **{"kittypyr.connection_placeholders_max": "300"})
    try:
        assert most_placeholders(app) <= 300
    finally:
        close(app)


@pytest.mark.parametrize("value", ["many", "-1", "2.5"])
def test_a_bound_that_is_not_a_count_is_refused_with_the_settings_name(tmp_path, value):
    with pytest.raises(SystemExit, match="kittypyr.connection_placeholders_max must be a whole number"):
        make_app(tmp_path, **{"kittypyr.connection_placeholders_max": value})


def test_pages_do_not_empty_the_connection_archiving_keeps_and_archiving_gets_it_back(archive_copy):
    # Pages bounded at 300, archiving unbounded: the pages in between must
    # neither take the archiving connection nor leave it emptied.
    with archiver_and_pages(archive_copy, pages_max=300, archiver_max=0) as (app, client):
        for n in range(3):
            archive_through_the_api(client, n)
            kept = placeholders_by_connection(app)[-1]
            assert kept > 300  # what archiving one message into this archive keeps loaded
            most_placeholders(app, client)
            *reading, archiving = placeholders_by_connection(app)
            assert archiving >= kept, "the pages emptied the archiving connection"
            assert reading and max(reading) <= 300
        assert "Posted number 2" in client.get(f"/search?q=posted&mlist={LIST}", status=200).text


def test_archiving_keeps_within_its_own_bound(archive_copy):
    with archiver_and_pages(archive_copy, pages_max=0, archiver_max=300) as (app, client):
        for n in range(3):
            archive_through_the_api(client, n)
            assert placeholders_by_connection(app)[-1] <= 300
        assert "Posted number 1" in client.get(f"/search?q=posted&mlist={LIST}", status=200).text


def test_an_archiver_bound_that_is_not_a_count_is_refused_with_the_settings_name(tmp_path):
    with pytest.raises(SystemExit, match="kittypyr.archiver_placeholders_max must be a whole number"):
        make_app(tmp_path, **{"kittypyr.archiver_placeholders_max": "lots"})
