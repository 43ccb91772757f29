"""mbox exports of the original bytes, as a reader downloads them (WebTest)."""

import gzip
import re
import zlib
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.importing import import_mail
from kittypyr.mailboxes import read_mail
from kittypyr.moderation import delete_messages
from kittypyr.msgid import message_id_hash
from kittypyr.search import run_search
from kittypyr.security import User
from tests.accounts import FakeMailman, log_in
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"
PRIVATE = "board@lists.example.org"
MEMBER = "member@example.org"
START = datetime(2021, 3, 30, 8, 0, tzinfo=timezone.utc)


def mid(n):
    return f"<exp{n}@example.org>"


def h(n):
    return message_id_hash(mid(n))


def originals():
    """Mail that an mbox must quote or frame with care, by number.

    0 starts a thread in March; 1 replies to it with body lines that look
    like envelopes (quoted the mboxrd way); 2 (CRLF mail) and 3 (no final
    newline) carry it on into April; 4 starts another thread in April and
    5 replies to it.
    """
    return {
        0: make_message(message_id=mid(0), subject="Exports", date=START, body="The first.\n"),
        1: make_message(message_id=mid(1), subject="Re: Exports", date=START + timedelta(hours=1),
                        in_reply_to=mid(0),
                        body="Quoting:\n\nFrom here on it is a body line.\n>From quoted once\n"
                             ">>From quoted twice\n  From indented\n"),
        2: make_message(message_id=mid(2), subject="Re: Exports", date=START + timedelta(days=2, hours=2),
                        in_reply_to=mid(1), body="Windows mail.\n", crlf=True),
        3: make_message(message_id=mid(3), subject="Re: Exports", date=START + timedelta(days=2, hours=3),
                        in_reply_to=mid(0), body=b"No final newline"),
        4: make_message(message_id=mid(4), subject="April", date=START + timedelta(days=4),
                        sender=("Bea", "bea@example.org"), body="Spring.\nFrom April on.\n"),
        5: make_message(message_id=mid(5), subject="Re: April", date=START + timedelta(days=4, hours=1),
                        in_reply_to=mid(4), body="Indeed.\n"),
    }


def fill(app):
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for raw in originals().values():
            archive_message(mailing_list, raw)
        board = ensure_mailing_list(env["root"], PRIVATE)
        board.archive_policy = "private"
        archive_message(board, make_message(message_id="<secret@example.org>", subject="Exports secret",
                                            date=START, body="Confidential.\n"))
        transaction.commit()


@pytest.fixture
def app(tmp_path):
    application = make_app(tmp_path)
    fill(application)
    yield application
    application.registry._zodb_databases[""].close()


def unpacked(response, tmp_path, name="export.mbox"):
    """The messages of a downloaded export as the importer reads them: {hash: raw bytes}."""
    assert response.status_int == 200
    assert response.content_type == "application/gzip"
    assert response.headers["Content-Disposition"].startswith("attachment; filename=")
    path = tmp_path / name
    path.write_bytes(gzip.decompress(response.body))
    found = {}
    for mail in read_mail(path):
        match = re.search(rb"^Message-ID: (.*?)\r?$", mail.raw, re.MULTILINE | re.IGNORECASE)
        found[message_id_hash(match.group(1).decode())] = mail.raw
    return found


def test_a_whole_list_export_holds_every_original_byte_for_byte(app, tmp_path):
    response = TestApp(app).get(f"/list/{LIST}/export/dev.mbox.gz")
    assert response.headers["Content-Disposition"] == 'attachment; filename="dev.mbox.gz"'
    mails = unpacked(response, tmp_path)
    expected = originals()
    assert list(mails) == [h(n) for n in range(6)]  # oldest first
    for n, raw in expected.items():
        # An mbox ends every message with a line end: mail without one gets it.
        assert mails[h(n)] == (raw if raw.endswith(b"\n") else raw + b"\n"), n
    text = gzip.decompress(response.body)
    # mboxrd: every line that reads like an envelope gets one more '>'.
    assert b"\n\n>From here on it is a body line.\n>>From quoted once\n>>>From quoted twice\n" in text
    assert b"\n>From April on.\n" in text and b"\n  From indented\n" in text
    assert len(re.findall(rb"^From ", text, re.MULTILINE)) == 6
    assert text.startswith(b"From sender@example.org Tue Mar 30 08:00:00 2021\n")
    assert b"Confidential" not in text  # another list's mail


def test_the_export_is_gzip_that_any_reader_takes_whole(app):
    body = TestApp(app).get(f"/list/{LIST}/export/dev.mbox.gz").body
    # Read member after member, as zcat does.
    data, rest = b"", body
    while rest:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        data += inflater.decompress(rest)
        assert inflater.eof
        rest = inflater.unused_data
    assert data == gzip.decompress(body)


def test_date_ranges_months_threads_and_single_messages(app, tmp_path):
    browser = TestApp(app)
    export = f"/list/{LIST}/export/part.mbox.gz"
    # start is the first day included, end the first day left out (as HyperKitty reads them).
    assert list(unpacked(browser.get(export, {"start": "2021-04-01"}), tmp_path)) == [h(2), h(3), h(4), h(5)]
    assert list(unpacked(browser.get(export, {"end": "2021-03-31"}), tmp_path)) == [h(0), h(1)]
    assert list(unpacked(browser.get(export, {"start": "2021-04-01", "end": "2021-04-02"}),
                         tmp_path)) == [h(2), h(3)]
    assert list(unpacked(browser.get(export, {"start": "2021-04-01", "end": "2021-05-01"}),
                         tmp_path)) == [h(2), h(3), h(4), h(5)]
    assert list(unpacked(browser.get(export, {"thread": h(0)}), tmp_path)) == [h(0), h(1), h(2), h(3)]
    # A thread named by any of its messages' hashes, as other archives name threads.
    assert list(unpacked(browser.get(export, {"thread": h(5)}), tmp_path)) == [h(4), h(5)]
    assert list(unpacked(browser.get(export, {"message": h(1)}), tmp_path)) == [h(1)]
    assert list(unpacked(browser.get(export, {"thread": h(0), "start": "2021-04-01"}),
                         tmp_path)) == [h(2), h(3)]
    thread = browser.get(f"/list/{LIST}/thread/{h(4)}/t.mbox.gz")
    assert thread.headers["Content-Disposition"] == f'attachment; filename="dev-{h(4)}.mbox.gz"'
    assert list(unpacked(thread, tmp_path)) == [h(4), h(5)]
    empty = browser.get(export, {"start": "2030-01-01"})
    assert gzip.decompress(empty.body) == b""


def test_what_cannot_be_exported_says_so(app):
    browser = TestApp(app)
    browser.get(f"/list/{LIST}/export/dev.mbox.gz", {"start": "yesterday"}, status=400)
    browser.get(f"/list/{LIST}/export/dev.mbox.gz", {"end": "2021-02-30"}, status=400)
    browser.get(f"/list/{LIST}/export/dev.mbox.gz", {"message": "NOSUCHHASH"}, status=404)
    browser.get(f"/list/{LIST}/export/dev.mbox.gz", {"thread": "NOSUCHHASH"}, status=404)
    browser.get(f"/list/{LIST}/export/dev.zip", status=404)
    browser.get(f"/list/{LIST}/export/", status=404)
    browser.get(f"/list/{LIST}/export/a/b.mbox.gz", status=404)
    browser.get("/list/nobody@lists.example.org/export/x.mbox.gz", status=404)


def test_an_export_imported_into_an_empty_archive_gives_the_same_archive(app, tmp_path):
    body = TestApp(app).get(f"/list/{LIST}/export/dev.mbox.gz").body
    mbox = tmp_path / "dev.mbox.gz"
    mbox.write_bytes(body)

    def contents(application):
        with prepare(registry=application.registry) as env:
            mailing_list = env["root"].lists[LIST]
            return {
                name: (m.original_bytes().rstrip(b"\n"), m.thread, m.parent, m.subject, m.date)
                for name, m in mailing_list.messages.items()
            }, {key: sorted(t.members) for key, t in mailing_list.threads.items()}

    (tmp_path / "other").mkdir()
    other = make_app(tmp_path / "other")
    try:
        with prepare(registry=other.registry) as env:
            report = import_mail(env["root"], LIST, [str(mbox)], transaction.manager, workers=0,
                                 progress=False)
        assert report.total("archived") == 6 and report.ok and not report.files[0].doubtful
        assert contents(other) == contents(app)
        # And every original is the one received (mail 3 gained its final newline).
        with prepare(registry=other.registry) as env:
            messages = env["root"].lists[LIST].messages
            for n, raw in originals().items():
                assert messages[h(n)].original_bytes() in (raw, raw + b"\n")
    finally:
        other.registry._zodb_databases[""].close()


def test_deleted_messages_are_in_no_export(app, tmp_path):
    with prepare(registry=app.registry) as env:
        delete_messages(env["root"].lists[LIST], [h(5)], User("mod@example.org", "Mod"))
        transaction.commit()
    browser = TestApp(app)
    assert h(5) not in unpacked(browser.get(f"/list/{LIST}/export/dev.mbox.gz"), tmp_path)
    assert list(unpacked(browser.get(f"/list/{LIST}/thread/{h(4)}/t.mbox.gz"), tmp_path)) == [h(4)]
    assert list(unpacked(browser.get("/search.mbox.gz", {"q": "indeed"}), tmp_path)) == []
    browser.get(f"/list/{LIST}/export/dev.mbox.gz", {"message": h(5)}, status=410)  # gone, as its page
    assert b"Indeed" not in gzip.decompress(browser.get(f"/list/{LIST}/export/dev.mbox.gz").body)


def test_private_lists_are_exported_to_their_members_only(app, tmp_path, monkeypatch):
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    fake.add_user("outsider@example.org", "Otto")
    anonymous = TestApp(app)
    page = anonymous.get(f"/list/{PRIVATE}/export/board.mbox.gz", status=403)
    assert "Confidential" not in page.text
    anonymous.get(f"/list/{PRIVATE}/thread/{message_id_hash('<secret@example.org>')}/t.mbox.gz", status=403)
    assert b"Confidential" not in gzip.decompress(anonymous.get("/search.mbox.gz", {"q": "exports"}).body)
    outsider = TestApp(app)
    log_in(outsider, "outsider@example.org")
    outsider.get(f"/list/{PRIVATE}/export/board.mbox.gz", status=403)
    assert b"Confidential" not in gzip.decompress(outsider.get("/search.mbox.gz", {"q": "exports"}).body)
    member = TestApp(app)
    log_in(member, MEMBER)
    answer = member.get(f"/list/{PRIVATE}/export/board.mbox.gz")
    assert b"Confidential" in gzip.decompress(answer.body)
    assert answer.headers["Cache-Control"] == "no-cache, private"
    assert b"Confidential" in gzip.decompress(member.get("/search.mbox.gz", {"q": "exports"}).body)


def test_a_search_exports_its_results_oldest_first(app, tmp_path):
    browser = TestApp(app)
    found = browser.get("/search.mbox.gz", {"q": "exports"})
    assert found.headers["Content-Disposition"] == 'attachment; filename="search.mbox.gz"'
    assert list(unpacked(found, tmp_path)) == [h(0), h(1), h(2), h(3)]
    assert list(unpacked(browser.get("/search.mbox.gz", {"q": "from:bea"}), tmp_path)) == [h(4)]
    assert list(unpacked(browser.get("/search.mbox.gz", {"q": "exports", "mlist": PRIVATE}), tmp_path)) == []
    assert gzip.decompress(browser.get("/search.mbox.gz").body) == b""


def test_pages_link_to_their_exports(app, tmp_path):
    browser = TestApp(app)
    pages = {
        f"/list/{LIST}/": [h(n) for n in range(6)],
        f"/list/{LIST}/2021/4/": [h(2), h(3), h(4), h(5)],
        f"/list/{LIST}/thread/{h(0)}/": [h(0), h(1), h(2), h(3)],
        f"/list/{LIST}/message/{h(1)}/": [h(1)],
        "/search?q=april": [h(4), h(5)],
    }
    for url, expected in pages.items():
        page = browser.get(url)
        links = [a for a in page.html.select("a.mbox") if a.get("href")]
        assert links, url
        assert list(unpacked(browser.get(links[0]["href"]), tmp_path)) == expected, url
    month = browser.get(f"/list/{LIST}/2021/3/").html.select_one("a.mbox")["href"]
    assert month == f"http://localhost/list/{LIST}/export/dev-2021-03.mbox.gz?start=2021-03-01&end=2021-04-01"
    thread_page = browser.get(f"/list/{LIST}/message/{h(1)}/")
    assert f"/list/{LIST}/thread/{h(0)}/t.mbox.gz" in [a["href"].replace("http://localhost", "")
                                                       for a in thread_page.html.select("a.mbox")]


def test_large_originals_and_the_old_keys_of_merged_threads(app, tmp_path):
    import random

    from tests.mailbuilder import attachment, multipart

    # Over 256 KB compressed: the original is a blob file, not a record.
    big = make_message(message_id="<big@example.org>", subject="A large one", date=START + timedelta(days=9),
                       in_reply_to="<late@example.org>",
                       body=multipart("mixed", "See the file.\nFrom the lab.\n",
                                      attachment(random.Random(1).randbytes(400_000), filename="noise.bin")))
    late = make_message(message_id="<late@example.org>", subject="Late start", date=START + timedelta(days=8))
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        archive_message(mailing_list, big)
        # The parent arrives after its reply: the reply's thread joins the parent's.
        archive_message(mailing_list, late)
        assert type(mailing_list.messages[message_id_hash("<big@example.org>")].original).__name__ == "Blob"
        transaction.commit()
    browser = TestApp(app)
    old_key = message_id_hash("<big@example.org>")
    moved = browser.get(f"/list/{LIST}/thread/{old_key}/t.mbox.gz", status=301)
    assert moved.location == f"http://localhost/list/{LIST}/thread/{message_id_hash('<late@example.org>')}/t.mbox.gz"
    export = moved.follow()
    assert unpacked(export, tmp_path) == {message_id_hash("<late@example.org>"): late, old_key: big}
    assert b"\n>From the lab.\n" in gzip.decompress(export.body)
    feed = browser.get(f"/list/{LIST}/thread/{old_key}/t.atom", status=301)
    assert feed.location.endswith(f"/thread/{message_id_hash('<late@example.org>')}/t.atom")


def test_a_reused_message_id_keeps_its_hashes_through_an_export(app, tmp_path):
    # Two different messages with one Message-ID: the first archived keeps the
    # plain hash, the other gets a derived one, though it is dated earlier.
    first = make_message(message_id="<reused@example.org>", subject="Reused", date=START + timedelta(days=20),
                         body="The first to arrive.\n")
    second = make_message(message_id="<reused@example.org>", subject="Reused", date=START + timedelta(days=10),
                          body="Older, but archived second.\n")
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        archive_message(mailing_list, first)
        archive_message(mailing_list, second)
        before = {name: m.original_bytes() for name, m in mailing_list.messages.items()
                  if m.original_message_id == "reused@example.org"}
        transaction.commit()
    assert len(before) == 2 and before[message_id_hash("<reused@example.org>")] == first
    mbox = tmp_path / "dev.mbox.gz"
    mbox.write_bytes(TestApp(app).get(f"/list/{LIST}/export/dev.mbox.gz").body)
    (tmp_path / "other").mkdir()
    other = make_app(tmp_path / "other")
    try:
        with prepare(registry=other.registry) as env:
            import_mail(env["root"], LIST, [str(mbox)], transaction.manager, workers=0, progress=False)
            messages = env["root"].lists[LIST].messages
            assert {name: messages[name].original_bytes() for name in before} == before
            # The id leads to both again.
            assert len(run_search(env["root"], "id:reused@example.org", [LIST]).hits) == 2
    finally:
        other.registry._zodb_databases[""].close()


@pytest.mark.parametrize("path", ["/search.mbox.gz?q=zzzznomatchword", f"/list/{LIST}/export/x.mbox.gz?start=2030-01-01"])
def test_an_export_of_nothing_is_an_empty_gzip_file(app, tmp_path, path):
    """gzip and zcat refuse a file of no bytes ("unexpected end of file"): an export that found no
    message is a gzip file of nothing."""
    import shutil
    import subprocess

    body = TestApp(app).get(path).body
    (tmp_path / "empty.mbox.gz").write_bytes(body)
    unzipped = subprocess.run([shutil.which("gzip"), "-dc", str(tmp_path / "empty.mbox.gz")], capture_output=True)
    assert unzipped.returncode == 0, unzipped.stderr
    assert unzipped.stdout == b""


ENVELOPE = "From someone@example.net Tue May 30 12:00:00 2023"


def _crafted(case):
    """Mail a sender made to be cut in two by the guesses an mbox of an unknown writer needs."""
    when = datetime(2023, 5, 30, 12, 0, tzinfo=timezone.utc)
    if case == "an envelope line after text":
        return [make_message(message_id="<glued@example.org>", subject="Glued", date=when,
                             body=f"Paste from my terminal: {ENVELOPE}\nSubject: forged\nTo: nobody\n\nrest\n")]
    if case == "an envelope line after NUL bytes":
        return [make_message(message_id="<nul@example.org>", subject="NUL", date=when,
                             body=f"dump\n\n\x00\x00\x00{ENVELOPE}\nSubject: forged\n\nrest\n".encode())]
    if case == "posts under one Message-ID, Date and sender":
        # A mailer that makes its ids from the time: Mailman's archiver kept
        # all three; an import of the export took two for copies of the first.
        return [make_message(message_id="<time@example.org>", subject=f"Alert {n}", date=when,
                             body=f"Alert number {n}.\n") for n in range(3)]
    # A Content-Length that reaches over the next message of the export.
    victim = make_message(message_id="<victim@example.org>", subject="Victim", date=when + timedelta(hours=1),
                          sender=("Vic", "vic@example.org"), body="A message of its own.\n")
    body = b"attacker\n"
    length = len(body) + 1 + len(b"From vic@example.org Tue May 30 13:00:00 2023\n") + len(victim)
    return [make_message(message_id="<swallow@example.org>", subject="Swallower", date=when,
                         headers={"Content-Length": str(length)}, body=body), victim]


@pytest.mark.parametrize("case", ["an envelope line after text", "an envelope line after NUL bytes",
                                  "a Content-Length over the next message",
                                  "posts under one Message-ID, Date and sender"])
def test_an_export_is_read_back_at_its_envelope_lines_alone(tmp_path, case):
    # Its messages were cut, or swallowed one another, where a reader of an
    # mbox of unknown origin guesses: a sender could make a message that an
    # export imported again made into two, one of them forged.
    from tests.test_archiver_api import make, post

    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, second = make(tmp_path / "first"), make(tmp_path / "second")

    def stored(application):
        with prepare(registry=application.registry) as env:
            return {name: m.original_bytes().rstrip(b"\n") for name, m in env["root"].lists[LIST].messages.items()}

    try:
        browser = TestApp(first)
        for raw in _crafted(case):
            post(browser, raw)
        export = tmp_path / "dev.mbox.gz"
        export.write_bytes(browser.get(f"/list/{LIST}/export/dev.mbox.gz").body)
        assert gzip.decompress(export.read_bytes()).startswith(b"From ")  # gzip reads it as ever
        with prepare(registry=second.registry) as env:
            report = import_mail(env["root"], LIST, [str(export)], transaction.manager, workers=0, progress=False)
        assert not report.files[0].doubtful
        assert stored(second) == stored(first) and len(stored(first)) == len(_crafted(case))
    finally:
        first.registry._zodb_databases[""].close()
        second.registry._zodb_databases[""].close()
