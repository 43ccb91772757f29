"""Replying and starting threads from the web, sent to a real SMTP server (aiosmtpd).

Roles come from FakeMailman; test_mailman.py sends a reply through a real
Mailman core and sees it come back archived.
"""

import socket
import threading
import time
from datetime import datetime, timezone
from email.message import EmailMessage

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.mailer import add_reply_headers
from kittypyr.msgid import message_id_hash
from kittypyr.security import SIGNUP_LIMIT
from kittypyr.suite.mta import SMTPSink
from tests.accounts import FakeMailman, forget_login_failures, log_in
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"
MEMBER = "mia@example.org"
STRANGER = "stan@example.org"


@pytest.fixture(scope="module")
def smtp():
    sink = SMTPSink().start()
    yield sink
    sink.stop()


@pytest.fixture(scope="module")
def site(tmp_path_factory, smtp):
    app = make_app(tmp_path_factory.mktemp("posting"))
    # Its tests post far more than a reader may in ten minutes.
    app.registry.settings.update({"kittypyr.smtp_host": "127.0.0.1", "kittypyr.smtp_port": str(smtp.port),
                                  "kittypyr.post_limit": "1000"})
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        archive_message(mailing_list, make_message(
            message_id="<root@example.org>", subject="Build broken", sender=("Ann", "ann@example.org"),
            date=datetime(2024, 1, 2, tzinfo=timezone.utc), body="The build fails on arm.\n"))
        archive_message(mailing_list, make_message(
            message_id="<second@example.org>", subject="Re: Build broken", sender=("Bob", "bob@example.org"),
            date=datetime(2024, 1, 3, tzinfo=timezone.utc), in_reply_to="<root@example.org>",
            references=["<root@example.org>"], body="Which compiler?\n"))
        transaction.commit()
    yield app
    app.registry._zodb_databases[""].close()


@pytest.fixture
def mailman(monkeypatch, smtp):
    smtp.clear()
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(LIST, "member")])
    fake.add_user(STRANGER, "Stan Stranger")
    return fake


SECOND = f"/list/{LIST}/message/{message_id_hash('<second@example.org>')}/"
THREAD = f"/list/{LIST}/thread/{message_id_hash('<root@example.org>')}/"


def new_thread_form(site, reader=MEMBER):
    """``(browser, form)``: ``reader`` logged in, before the list's new-thread form."""
    app = TestApp(site)
    log_in(app, reader)
    return app, app.get(f"/list/{LIST}/new").forms["compose-form"]


def test_anonymous_readers_are_asked_to_log_in_or_sign_up(site, mailman):
    page = TestApp(site).get(SECOND + "reply", status=403)
    assert page.forms["login-form"]["came_from"].value == SECOND + "reply"
    assert "Sign up" in page.text


def test_a_member_replies_with_the_whole_reference_chain(site, mailman, smtp):
    app = TestApp(site)
    log_in(app, MEMBER)
    form = app.get(SECOND + "reply").forms["compose-form"]
    assert form["subject"].value == "Re: Build broken"
    assert form["body"].value.startswith("> Which compiler?")
    assert "subscribe" not in form.fields  # already a member
    form["body"] = "GCC 13.\n\n" + form["body"].value
    answer = form.submit()
    assert answer.status_int == 303 and answer.location.endswith(THREAD)
    assert "Your message was sent to the list" in answer.follow().text
    sent = smtp.wait_for(timeout=10)
    assert sent.rcpt_tos == [LIST] and sent.mail_from == MEMBER
    mail = sent.message
    assert mail["From"] == "Mia Member <mia@example.org>"
    assert mail["To"] == LIST
    assert mail["Subject"] == "Re: Build broken"
    assert mail["In-Reply-To"] == "<second@example.org>"
    assert mail["References"].split() == ["<root@example.org>", "<second@example.org>"]
    assert mail["Message-ID"].startswith("<") and mail["Message-ID"].endswith("@localhost>")
    assert mail["User-Agent"].startswith("kittypyr")
    assert mail.get_content().startswith("GCC 13.")


def reply_archived(site, message_id, sender, day, body):
    """Archive a reply to the thread's first message; ``(its page's path, the id it is stored under)``."""
    with prepare(registry=site.registry) as env:
        reply = archive_message(env["root"].lists[LIST], make_message(
            message_id=message_id, subject="Re: Build broken", sender=sender,
            date=datetime(2024, 1, day, tzinfo=timezone.utc), in_reply_to="<root@example.org>",
            references=["<root@example.org>"], body=body))
        transaction.commit()
        return f"/list/{LIST}/message/{reply.__name__}/", reply.message_id


def test_a_reply_to_a_post_kept_under_a_derived_id_names_the_id_the_post_came_with(site, mailman, smtp):
    # Another post reusing <second@example.org>: the archive keeps it under
    # an id of its own making, which no mail client knows.
    path, stored_as = reply_archived(site, "<second@example.org>", ("Cy", "cy@example.org"), 4, "Clang 17 here.\n")
    assert stored_as != "second@example.org"
    app = TestApp(site)
    log_in(app, MEMBER)
    form = app.get(path + "reply").forms["compose-form"]
    form["body"] = "Thanks.\n"
    form.submit(status=303)
    mail = smtp.wait_for(timeout=10).message
    assert mail["In-Reply-To"] == "<second@example.org>"
    assert mail["References"].split() == ["<root@example.org>", "<second@example.org>"]


def test_no_post_is_offered_to_a_list_mailman_no_longer_has_and_one_not_archived_says_so(site, mailman, smtp):
    gone, unarchived = "gone@lists.example.org", "quiet@lists.example.org"
    with prepare(registry=site.registry) as env:
        for address in (gone, unarchived):
            archive_message(ensure_mailing_list(env["root"], address), make_message(
                message_id=f"<first-{address.split('@')[0]}@example.org>", subject="Old news", sender=("Ann", "ann@example.org"),
                date=datetime(2024, 1, 2, tzinfo=timezone.utc), body="Old news.\n"))
        env["root"].lists[gone].in_mailman = False
        env["root"].lists[gone].archive_policy = "public"
        env["root"].lists[unarchived].archive_policy = "never"
        transaction.commit()
    mailman.add_user(MEMBER, "Mia Member", roles=[(LIST, "member"), (gone, "member"), (unarchived, "member")])
    app = TestApp(site)
    log_in(app, MEMBER)
    message = f"/list/{gone}/message/{message_id_hash('<first-gone@example.org>')}/"
    assert 'class="reply"' not in app.get(message).text
    assert 'class="new-thread"' not in app.get(f"/list/{gone}/").text
    app.get(message + "reply", status=403)
    app.get(f"/list/{gone}/new", status=403)

    form = app.get(f"/list/{unarchived}/new").forms["compose-form"]
    form["subject"], form["body"] = "Still here", "Hello.\n"
    said = form.submit(status=303).follow().text
    assert "no longer archived here" in said and "It appears here once" not in said
    assert smtp.wait_for(lambda m: unarchived in m.rcpt_tos, timeout=10)
    assert not any(gone in m.rcpt_tos for m in smtp.messages)


def test_headers_cannot_be_injected_through_subject_or_name(site, mailman, smtp):
    mailman.add_user(MEMBER, "Mia\r\nBcc: victim@example.org", roles=[(LIST, "member")])
    _, form = new_thread_form(site)
    form["subject"] = "Hello\r\nBcc: victim@example.org\r\n\r\nInjected body"
    form["body"] = "Real body.\n"
    form.submit(status=303)
    sent = smtp.wait_for(timeout=10)
    assert sent.rcpt_tos == [LIST]
    mail = sent.message
    assert mail["Bcc"] is None
    assert "\n" not in mail["Subject"] and "Injected body" in mail["Subject"]
    assert mail["In-Reply-To"] is None
    assert mail.get_content().strip() == "Real body."


ENCODED_BREAK = "=?utf-8?q?=0D=0ABcc=3A_victim=40example=2Eorg=0D=0AMessage-ID=3A_=3Cforged=40example=2Eorg=3E?="
# A lone LF or CR, which mail readers and MTAs take for a line's end too.
LONE_LF = "=?utf-8?q?x=0AReply-To=3A_attacker=40evil=2Eexample=0AMessage-ID=3A_=3Cforged=40evil=2Eexample=3E?="
LONE_CR = "=?utf-8?q?x=0DReply-To=3A_attacker=40evil=2Eexample?="
# A name that would make the From another sender's.
OTHER_SENDER = "=?utf-8?q?Linus_Torvalds_=3Ctorvalds=40linux-foundation=2Eorg=3E=0AX-Comment=3A?="


def _header_names(raw):
    """The names of the header fields of the mail ``raw`` (bytes), in order."""
    head = raw.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0].decode("ascii", "replace")
    return [line.split(":", 1)[0].lower() for line in head.split("\n") if line and line[0] not in " \t"]


@pytest.mark.parametrize("encoded", [ENCODED_BREAK, LONE_LF, LONE_CR, OTHER_SENDER],
                         ids=["crlf", "lone-lf", "lone-cr", "other-sender"])
@pytest.mark.parametrize("where", ["subject", "name"])
def test_no_header_is_forged_through_an_encoded_line_break(site, mailman, smtp, where, encoded):
    # The encoded word decodes to a line break inside the header, which the
    # mail library then wrote out raw: a Bcc, a Reply-To and a Message-ID
    # of the poster's choosing, the real header pushed into the body, or a
    # From naming another sender (a name Mailman holds, changed after sign-up).
    if where == "name":
        mailman.add_user(MEMBER, f"Mia {encoded}", roles=[(LIST, "member")])
    _, form = new_thread_form(site)
    form["subject"] = f"Hello {encoded}" if where == "subject" else "Hello"
    form["body"] = "Real body.\n"
    refused = form.submit(status=400)
    assert "line break" in refused.text
    time.sleep(0.2)
    assert smtp.messages == []


def test_a_reply_to_a_message_whose_id_hides_an_encoded_line_break_forges_no_header(site, mailman, smtp):
    evil = f"<evil{ENCODED_BREAK}@example.org>"
    with prepare(registry=site.registry) as env:
        archive_message(env["root"].lists[LIST], make_message(
            message_id=evil, subject="Question", sender=("Eve", "eve@example.org"),
            date=datetime(2024, 1, 5, tzinfo=timezone.utc), body="Thoughts?\n"))
        transaction.commit()
    app = TestApp(site)
    log_in(app, MEMBER)
    form = app.get(f"/list/{LIST}/message/{message_id_hash(evil)}/reply").forms["compose-form"]
    form["body"] = "I agree.\n"
    form.submit(status=303)
    sent = smtp.wait_for(timeout=10)
    assert sent.rcpt_tos == [LIST]
    names = _header_names(sent.data)
    assert sorted(names) == sorted(set(names)) and "bcc" not in names, names
    assert sent.message["Message-ID"] != "<forged@example.org>"
    assert sent.message.get_content().strip() == "I agree."


def test_a_non_member_is_told_what_subscribing_means(site, mailman, smtp):
    app = TestApp(site)
    log_in(app, STRANGER)
    page = app.get(SECOND + "reply")
    assert "You are not subscribed to this list" in page.text
    assert "receive the list's mail" in page.text
    form = page.forms["compose-form"]
    form["body"] = "Me too.\n"
    refused = form.submit(status=400)
    assert "please confirm that you want to subscribe" in refused.text
    assert smtp.messages == []


def test_empty_posts_are_refused_and_the_form_keeps_what_was_typed(site, mailman, smtp):
    _, form = new_thread_form(site)
    form["subject"] = "A subject only"
    form["body"] = "   "
    page = form.submit(status=400)
    assert "Your message is empty" in page.text
    assert page.forms["compose-form"]["subject"].value == "A subject only"
    assert smtp.messages == []


def test_a_body_line_starting_with_from_reaches_the_list_as_typed(site, mailman, smtp):
    _, form = new_thread_form(site)
    form["subject"] = "Reading the patch"
    form["body"] = "From what I see, it works.\nFrom here on, too.\n"
    form.submit(status=303)
    sent = smtp.wait_for().data
    assert b"\r\nFrom what I see, it works.\r\nFrom here on, too.\r\n" in sent and b">From" not in sent


class OddSMTPServer(threading.Thread):
    """An SMTP server on loopback, for one connection, answering as ``answers`` says ({verb: reply}), else 250."""

    def __init__(self, **answers):
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.answers = {verb.upper().encode(): reply for verb, reply in answers.items()}
        self.accepted = []

    def run(self):
        connection, _ = self.listener.accept()
        with connection, connection.makefile("rb") as lines:
            def say(text):
                connection.sendall(text.encode() + b"\r\n")

            say("220 sink ready")
            for line in lines:
                verb = line[:4].upper()
                if verb in self.answers:
                    say(self.answers[verb])
                    if verb == b"QUIT" or self.answers[verb].startswith("5"):
                        if verb == b"QUIT":
                            return
                        continue
                elif verb == b"DATA":
                    say("354 go on")
                    self.accepted.append(b"".join(iter(lines.readline, b".\r\n")))
                    say("250 queued")
                elif verb == b"QUIT":
                    say("221 bye")
                    return
                else:
                    say("250 ok")


def form_sent_through(site, monkeypatch, **answers):
    """``(server, form)``: an ``OddSMTPServer`` answering so, which posts go to, and a member's new-thread form."""
    server = OddSMTPServer(**answers)
    server.start()
    monkeypatch.setitem(site.registry.settings, "kittypyr.smtp_port", str(server.port))
    return server, new_thread_form(site)[1]


def test_mail_the_smtp_server_accepted_is_told_sent_whatever_it_answers_to_quit(site, mailman, monkeypatch):
    server, form = form_sent_through(site, monkeypatch, quit="421 closing at once")
    form["subject"] = "Queued once"
    form["body"] = "Sent once.\n"
    form.submit(status=303)
    server.join(timeout=10)
    assert len(server.accepted) == 1 and b"Sent once." in server.accepted[0]


def test_a_form_sent_twice_sends_one_mail(site, mailman, smtp):
    # A reload after sending, or the Back button and Send again.
    app, form = new_thread_form(site)
    form["subject"], form["body"] = "Only once", "Said once.\n"
    form.submit(status=303)
    again = form.submit(status=303).follow()
    assert "was sent already" in again.text
    time.sleep(0.3)
    assert len([m for m in smtp.messages if b"Said once." in m.data]) == 1
    # The same form, changed before it is sent again, is another message.
    form["body"] = "Said once, then corrected.\n"
    form.submit(status=303)
    smtp.wait_for(lambda m: b"then corrected" in m.data, timeout=10)
    # A new form is a new message, whatever it says.
    form = app.get(f"/list/{LIST}/new").forms["compose-form"]
    form["subject"], form["body"] = "Only once", "Said once.\n"
    form.submit(status=303)
    smtp.wait_for(lambda m: len([x for x in smtp.messages if b"Said once." in x.data]) == 2, timeout=10)


def test_a_reply_to_a_message_deleted_meanwhile_is_not_sent_and_its_text_is_shown_back(site, mailman, smtp):
    from kittypyr import moderation
    from kittypyr.security import User

    path, _ = reply_archived(site, "<doomed@example.org>", ("Dan", "dan@example.org"), 5, "Spam, really.\n")
    doomed = message_id_hash("<doomed@example.org>")
    app = TestApp(site)
    log_in(app, MEMBER)
    form = app.get(path + "reply").forms["compose-form"]
    form["body"] = "A long answer I spent an hour on.\n"
    with prepare(registry=site.registry) as env:
        moderation.delete_messages(env["root"].lists[LIST], [doomed], User("admin@example.org", "Admin"),
                                   registry=site.registry)
        transaction.commit()
    gone = form.submit(status=410)
    assert "Your reply was not sent" in gone.text
    assert "A long answer I spent an hour on." in gone.html.select_one("textarea.typed").text
    app.get(path + "reply", status=410)
    time.sleep(0.2)
    assert not any(b"spent an hour" in m.data for m in smtp.messages)


def test_a_reader_can_send_only_so_many_posts_in_a_while(tmp_path, mailman, smtp):
    from kittypyr.security import POST_LIMIT

    app = make_app(tmp_path)
    app.registry.settings.update({"kittypyr.smtp_host": "127.0.0.1", "kittypyr.smtp_port": str(smtp.port)})
    with prepare(registry=app.registry) as env:
        ensure_mailing_list(env["root"], LIST)
        transaction.commit()
    try:
        browser = TestApp(app)
        log_in(browser, MEMBER)
        for n in range(POST_LIMIT):
            form = browser.get(f"/list/{LIST}/new").forms["compose-form"]
            form["subject"], form["body"] = f"Post {n}", f"Body {n}.\n"
            form.submit(status=303)
        form = browser.get(f"/list/{LIST}/new").forms["compose-form"]
        form["subject"], form["body"] = "One too many", "Kept in the form.\n"
        refused = form.submit(status=429)
        assert "Please wait" in refused.text and "Kept in the form." in refused.text
        assert refused.headers["Retry-After"].isdigit()
        time.sleep(0.3)
        assert len(smtp.messages) == POST_LIMIT
    finally:
        app.registry._zodb_databases[""].close()


def test_a_post_the_smtp_server_refuses_for_good_says_why_and_keeps_the_text(site, mailman, monkeypatch):
    server, form = form_sent_through(site, monkeypatch, rcpt="550 5.7.1 relaying denied for dev@lists.example.org")
    form["subject"], form["body"] = "Refused", "Kept here.\n"
    refused = form.submit(status=502)
    assert "refused your message" in refused.text and "relaying denied" in refused.text
    assert "try again later" not in refused.text and "Kept here." in refused.text
    server.join(timeout=10)
    assert server.accepted == []


def test_a_reader_logged_out_meanwhile_is_shown_what_they_wrote(site, mailman, smtp):
    writer, elsewhere = TestApp(site), TestApp(site)
    log_in(writer, MEMBER)
    log_in(elsewhere, MEMBER)
    form = writer.get(SECOND + "reply").forms["compose-form"]
    form["body"] = "An answer typed for a long while.\n"
    elsewhere.get("/").forms["logout"].submit()  # ends every session of the account
    refused = form.submit(status=403)
    assert "your message was not sent" in refused.text and "login-form" in refused.forms
    assert "An answer typed for a long while." in refused.html.select_one("textarea.typed").text
    time.sleep(0.2)
    assert not any(b"typed for a long while" in m.data for m in smtp.messages)


def test_a_post_limit_of_zero_or_less_limits_nothing():
    from kittypyr.merging import AgeingCounts
    from kittypyr.security import post_throttle

    counts = AgeingCounts()
    for _ in range(3):
        post_throttle.posted(counts, MEMBER)
    assert post_throttle.wait_seconds(counts, MEMBER, 0) == 0
    assert post_throttle.wait_seconds(counts, MEMBER, -1) == 0
    assert post_throttle.wait_seconds(counts, MEMBER, 3) > 0


def test_posting_needs_the_form_token(site, mailman, smtp):
    app = TestApp(site)
    log_in(app, MEMBER)
    app.post(f"/list/{LIST}/new", {"subject": "x", "body": "y"}, status=400)
    assert smtp.messages == []


def test_an_unreachable_smtp_server_keeps_the_message_in_the_form(site, mailman, monkeypatch):
    monkeypatch.setitem(site.registry.settings, "kittypyr.smtp_port", "1")
    _, form = new_thread_form(site)
    form["subject"], form["body"] = "Lost?", "Not lost.\n"
    page = form.submit(status=503)
    assert "could not be sent" in page.text
    assert page.forms["compose-form"]["body"].value.strip() == "Not lost."


def test_a_reply_copies_no_control_characters_from_the_archived_ids(site, mailman, smtp):
    # Archived as received: a NUL and a BEL inside the Message-ID, a NUL in a reference.
    raw = make_message(
        message_id=b"<odd\x00id\x07@example.org>", subject="Re: mail jdoe@example.com about it",
        sender=("Bob", "bob@example.org"), date=datetime(2024, 1, 4, tzinfo=timezone.utc),
        in_reply_to="<root@example.org>", body="Odd client.\n",
        headers={"References": b"<root@example.org> <lost\x00ref@example.org>"})
    with prepare(registry=site.registry) as env:
        archive_message(env["root"].lists[LIST], raw)
        transaction.commit()
    odd = f"/list/{LIST}/message/{message_id_hash('<odd' + chr(0) + 'id' + chr(7) + '@example.org>')}/"
    app = TestApp(site)
    log_in(app, MEMBER)
    page = app.get(odd + "reply")
    # The reply form is a page too: the subject's address is not shown raw.
    assert "jdoe@example.com" not in page.text
    form = page.forms["compose-form"]
    assert form["subject"].value == "Re: mail jdoe at example.com about it"
    form["body"] = "Which client?\n"
    form.submit(status=303)
    sent = smtp.wait_for(timeout=10)
    header_section = sent.data.split(b"\r\n\r\n", 1)[0]
    assert not any(byte < 0x20 and byte not in b"\r\n\t" for byte in header_section)
    assert all(line[:1] in b" \t" or b":" in line for line in header_section.split(b"\r\n"))
    mail = sent.message
    assert mail["In-Reply-To"] == "<oddid@example.org>"
    assert mail["References"].split() == ["<root@example.org>", "<lostref@example.org>", "<oddid@example.org>"]
    assert mail.get_content().startswith("Which client?")


def test_reply_headers_keep_line_breaks_out_and_leave_out_ids_with_nothing_usable():
    message = EmailMessage()
    add_reply_headers(message, "parent\r\nBcc: victim@example.org", ["\x00\x01", "<a>b@example.org", "x" * 2000])
    assert message["In-Reply-To"] == "<parentBcc:victim@example.org>"
    assert message["References"] == "<ab@example.org> <parentBcc:victim@example.org>"
    assert message["Bcc"] is None
    nothing = EmailMessage()
    add_reply_headers(nothing, "\x00", [])
    assert nothing["In-Reply-To"] is None and nothing["References"] is None


def test_a_post_run_again_after_a_conflict_is_sent_once(tmp_path, mailman, smtp):
    """pyramid_retry runs a request again after a conflict: the mail it sent is not sent twice."""
    from tests import conflict_once

    conflict_once.failed_once.clear()
    app = make_app(tmp_path, includes="tests.conflict_once")
    app.registry.settings.update({"kittypyr.smtp_host": "127.0.0.1", "kittypyr.smtp_port": str(smtp.port)})
    try:
        with prepare(registry=app.registry) as env:
            ensure_mailing_list(env["root"], LIST)
            transaction.commit()
        browser = TestApp(app)
        log_in(browser, MEMBER)
        form = browser.get(f"/list/{LIST}/new").forms["compose-form"]
        form["subject"], form["body"] = "Once only", "Sent a single time.\n"
        assert form.submit().status_int == 303
        assert ("post", f"/list/{LIST}/new") in conflict_once.failed_once  # it was run twice
        smtp.wait_for(lambda m: b"Once only" in m.data, timeout=10)
        import time

        time.sleep(0.5)  # a second copy would be on its way by now
        assert len([m for m in smtp.messages if b"Once only" in m.data]) == 1
    finally:
        app.registry._zodb_databases[""].close()


def test_a_sign_up_mails_no_text_of_the_signers_choosing(site, mailman, smtp, monkeypatch):
    # Anyone may sign up with anyone's address: the confirmation mail goes
    # to that address from the site, and must say only what the site says.
    from kittypyr.views import accounts as account_views

    monkeypatch.setattr(account_views, "create_account", lambda registry, address, name, password: None)
    app = TestApp(site)
    form = app.get("/signup").forms["signup-form"]
    form["address"] = "someone@example.org"
    form["display_name"] = "your account is locked. Unlock it at https://evil.example/unlock today"
    form["password"] = form["password_again"] = "a long password"
    assert "We sent a mail to" in form.submit(status=200).text
    sent = smtp.wait_for(timeout=10)
    assert sent.rcpt_tos == ["someone@example.org"]
    text = sent.message.get_content()
    assert "confirm?token=" in text
    assert "evil.example" not in text and "locked" not in text


def test_an_account_signed_up_here_logs_in_only_once_its_sign_up_is_confirmed(site, mailman, smtp, monkeypatch):
    # Anyone may sign up anyone's address. Mailman may mark the address
    # proved another way later (its owner confirming a subscription by mail
    # does): the password of whoever signed it up then logged in as its owner.
    import re
    from urllib.parse import unquote

    from kittypyr.views import accounts as account_views

    monkeypatch.setattr(account_views, "create_account",
                        lambda registry, address, name, password: mailman.add_user(address, name, password))
    form = TestApp(site).get("/signup").forms["signup-form"]
    form["address"] = "prey@example.org"
    form["password"] = form["password_again"] = "the intruder's password"
    assert "We sent a mail to" in form.submit(status=200).text
    # This stand-in for Mailman says every address is proved.
    intruder = TestApp(site)
    refused = log_in(intruder, "prey@example.org", "the intruder's password")
    assert refused.status_int == 403 and "not been confirmed" in refused.text
    assert "Log out" not in intruder.get("/").text

    # Confirmed through its link, with the password chosen, it logs in.
    link = re.search(r"/confirm\?token=(\S+)", smtp.wait_for(timeout=10).message.get_content()).group(1)
    monkeypatch.setattr(account_views, "verify_address", lambda registry, address: None)
    confirmed = TestApp(site).post("/confirm", {"token": unquote(link), "password": "the intruder's password"})
    assert "is confirmed" in confirmed.text
    assert log_in(TestApp(site), "prey@example.org", "the intruder's password").status_int == 303
    forget_login_failures(site)


def test_an_address_signed_up_by_someone_else_is_signed_up_by_its_owner_once_that_link_expired(
        site, mailman, smtp, monkeypatch):
    from kittypyr.mailman import AccountExists
    from kittypyr.views import accounts as account_views

    def create(registry, address, name, password):
        if address in mailman.passwords:
            raise AccountExists(address)
        mailman.add_user(address, name, password)

    monkeypatch.setattr(account_views, "create_account", create)
    monkeypatch.setattr(account_views, "remove_unconfirmed_account",
                        lambda registry, address: mailman.remove_user(address))

    def sign_up(password):
        form = TestApp(site).get("/signup").forms["signup-form"]
        form["address"] = "owner@example.org"
        form["password"] = form["password_again"] = password
        return form.submit(status="*")

    assert sign_up("the intruder's password").status_int == 200
    # While the intruder's link may still be used, the address is taken.
    assert sign_up("the owner's password").status_int == 409
    with prepare(registry=site.registry) as env:
        archive = env["root"]
        archive.note_signup("owner@example.org", archive.signed_up_at("owner@example.org") - 4 * 24 * 3600)
        transaction.commit()
    assert "We sent a mail to" in sign_up("the owner's password").text
    assert mailman.passwords["owner@example.org"] == "the owner's password"
    forget_login_failures(site)  # the sign-ups counted against this client


def test_no_account_is_made_with_a_name_that_would_forge_the_header_of_its_posts(site, mailman, smtp, monkeypatch):
    from kittypyr.views import accounts as account_views

    made = []
    monkeypatch.setattr(account_views, "create_account", lambda registry, *account: made.append(account))
    form = TestApp(site).get("/signup").forms["signup-form"]
    form["address"] = "someone@example.org"
    form["display_name"] = f"Someone {ENCODED_BREAK}"
    form["password"] = form["password_again"] = "a long password"
    assert "line break" in form.submit(status=400).text
    assert made == []


@pytest.mark.parametrize("address", ["a/b@example.org", "a%2Fb@example.org", "a?b@example.org", "a#b@example.org",
                                     "%67uarded@example.org", "*@example.org"])
def test_no_account_is_made_for_an_address_that_could_never_log_in(site, mailman, smtp, monkeypatch, address):
    # Mailman takes these characters in an address, but finds an account by
    # its address in a URL path, where they mean something else: the account
    # could be neither confirmed nor logged in to.
    from kittypyr.views import accounts as account_views

    made = []
    monkeypatch.setattr(account_views, "create_account", lambda registry, *account: made.append(account))
    app = TestApp(site)
    form = app.get("/signup").forms["signup-form"]
    form["address"] = address
    form["password"] = form["password_again"] = "a long password"
    page = form.submit(status=400)
    assert "cannot be used for an account" in page.text
    assert made == []
    assert smtp.messages == []


def test_without_the_sites_address_no_sign_up_mails_a_link_the_request_chose(tmp_path, mailman, smtp, monkeypatch):
    # Without kittypyr.base_url a confirmation link could only be made from
    # the request's Host header, which whoever signs up writes: a link to
    # their own host in a mail to someone else's address would hand them the
    # token that confirms an account with their password.
    from kittypyr.views import accounts as account_views

    made = []
    monkeypatch.setattr(account_views, "create_account", lambda registry, *account: made.append(account))
    app = make_app(tmp_path)
    app.registry.settings.update({"kittypyr.base_url": "", "kittypyr.smtp_host": "127.0.0.1",
                                  "kittypyr.smtp_port": str(smtp.port)})
    try:
        browser = TestApp(app, extra_environ={"HTTP_HOST": "evil.example"})
        assert "Sign up" not in browser.get("/").text
        login = browser.get("/login")
        assert "Sign up" not in login.text
        page = browser.get("/signup", status=404)
        assert "kittypyr.base_url" in page.text
        page = browser.post("/signup", {"address": "someone@example.org", "password": "a long password",
                                        "password_again": "a long password",
                                        "csrf_token": login.forms["login-form"]["csrf_token"].value}, status=404)
        assert "kittypyr.base_url" in page.text
        assert made == [] and smtp.messages == []
    finally:
        app.registry._zodb_databases[""].close()


def test_one_client_can_have_only_a_few_confirmation_mails_sent_at_a_time(tmp_path, mailman, smtp, monkeypatch):
    # Anyone may sign up any address, and each sign-up makes an account and
    # mails that address: without a bound, one client could have the site
    # mail thousands of strangers.
    from kittypyr.views import accounts as account_views

    made = []
    monkeypatch.setattr(account_views, "create_account", lambda registry, *account: made.append(account))
    app = make_app(tmp_path)
    app.registry.settings.update({"kittypyr.smtp_host": "127.0.0.1", "kittypyr.smtp_port": str(smtp.port)})

    def sign_up(browser, address, status):
        form = browser.get("/signup").forms["signup-form"]
        form["address"] = address
        form["password"] = form["password_again"] = "a long password"
        return form.submit(status=status)

    try:
        flooder = TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.7"})
        for n in range(SIGNUP_LIMIT):
            assert "We sent a mail to" in sign_up(flooder, f"stranger{n}@example.org", 200).text
        refused = sign_up(flooder, "one-more@example.org", 429)
        assert "Too many sign-ups" in refused.text and int(refused.headers["Retry-After"]) > 0
        assert [account[0] for account in made] == [f"stranger{n}@example.org" for n in range(SIGNUP_LIMIT)]
        # Another reader is not held up by it.
        other = TestApp(app, extra_environ={"REMOTE_ADDR": "198.51.100.3"})
        assert "We sent a mail to" in sign_up(other, "someone@example.org", 200).text
        deadline = time.monotonic() + 10
        while len(smtp.messages) < SIGNUP_LIMIT + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(m.rcpt_tos[0] for m in smtp.messages) == sorted(
            [f"stranger{n}@example.org" for n in range(SIGNUP_LIMIT)] + ["someone@example.org"])
    finally:
        app.registry._zodb_databases[""].close()


def test_without_a_mail_server_no_page_offers_what_would_send_mail(tmp_path, mailman):
    # kittypyr.smtp_host left empty: replying, starting a thread and signing
    # up all send mail, and would answer "try again later" for ever.
    app = make_app(tmp_path)
    app.registry.settings["kittypyr.smtp_host"] = ""
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), make_message(
                message_id="<root@example.org>", subject="Build broken", sender=("Ann", "ann@example.org"),
                date=datetime(2024, 1, 2, tzinfo=timezone.utc), body="The build fails on arm.\n"))
            transaction.commit()
        member = TestApp(app)
        log_in(member, MEMBER)
        message = f"/list/{LIST}/message/{message_id_hash('<root@example.org>')}/"
        page = member.get(message)
        assert page.html.select("a.reply") == [] and page.html.select("a.reply-by-mail")
        assert member.get(f"/list/{LIST}/").html.select("a.new-thread") == []
        assert "Sign up" not in member.get("/login").text
        for path in (f"{message}reply", f"/list/{LIST}/new"):
            explained = member.get(path, status=404)
            assert "sends no mail" in explained.text and explained.html.select("a[href^='mailto:']")
        assert "kittypyr.smtp_host" in TestApp(app).get("/signup", status=404).text
    finally:
        app.registry._zodb_databases[""].close()


def test_a_sign_up_whose_mail_cannot_be_sent_leaves_no_account_behind(site, mailman, smtp, monkeypatch):
    """No mail server: the account made for the sign-up is taken back, so that signing up again works
    once mail goes out (it was left unconfirmed: signing up again said it existed, logging in that it was
    not confirmed, and nothing sent the mail again)."""
    from kittypyr.views import accounts as account_views
    from tests.functional import free_port

    accounts = set()

    def create(registry, address, name, password):
        if address in accounts:
            raise account_views.AccountExists(address)
        accounts.add(address)

    monkeypatch.setattr(account_views, "create_account", create)
    monkeypatch.setattr(account_views, "remove_unconfirmed_account",
                        lambda registry, address: accounts.discard(address))
    site.registry.settings["kittypyr.smtp_port"] = str(free_port())  # nobody listens there
    app = TestApp(site)

    def sign_up(status):
        form = app.get("/signup").forms["signup-form"]
        form["address"] = "someone@example.org"
        form["password"] = form["password_again"] = "a long password"
        return form.submit(status=status)

    page = sign_up(503)
    assert "could not be sent" in page.text and "no account was made" in page.text
    assert accounts == set()
    site.registry.settings["kittypyr.smtp_port"] = str(smtp.port)
    assert "We sent a mail to" in sign_up(200).text
    assert accounts == {"someone@example.org"}


@pytest.mark.parametrize("address, valid", [
    ("a@" + "." * 200_000 + "@", False),
    ("a@" + "b." * 200_000, False),
    ("x" * 200_000 + "@example.org", False),
    ("ada@example.org", True),
    ("ada@example", False),
    ("ada@.org", False),
    ("ada@example.", False),
    ("a da@example.org", False),
])
def test_a_sign_up_address_is_checked_once_whatever_its_length(address, valid):
    # Run apart: the pattern before tried every way of sharing the dots out (4.9 s at 40 KB, minutes beyond,
    # and every thread of the process waits meanwhile).
    from tests.functional import answered_apart

    assert answered_apart("kittypyr.views.accounts:is_signup_address", address) is valid
