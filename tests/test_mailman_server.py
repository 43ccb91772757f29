"""The Mailman fixture itself: a post reaches members and, with no archive
listening, waits in the archiver plugin's spool."""

import time
from email.message import EmailMessage
from email.utils import make_msgid

import pytest

from tests.mailman_server import MailmanCore, SMTPSink, free_port


@pytest.fixture(scope="module")
def smtp_sink():
    sink = SMTPSink().start()
    yield sink
    sink.stop()


@pytest.fixture(scope="module")
def mailman(tmp_path_factory, smtp_sink):
    # Nothing listens on this port, so every archiving attempt fails and the
    # plugin has to spool the message.
    core = MailmanCore(
        tmp_path_factory.mktemp("mailman"),
        archiver_base_url="http://127.0.0.1:%d/" % free_port(),
        archiver_key="smoke-test-key",
        smtp_port=smtp_sink.port,
    )
    core.start()
    yield core
    core.stop()


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    return condition()


def test_post_reaches_member_and_waits_in_archiver_spool(mailman, smtp_sink):
    client = mailman.client()
    domain = client.create_domain("smoke.example.org")
    mlist = domain.create_list("smoke")
    member = "member@example.net"
    mlist.subscribe(
        member,
        "A Member",
        pre_verified=True,
        pre_confirmed=True,
        pre_approved=True,
    )
    assert [m.email for m in mlist.members] == [member]

    message_id = make_msgid(domain="example.net")
    msg = EmailMessage()
    msg["From"] = "A Member <%s>" % member
    msg["To"] = mlist.fqdn_listname
    msg["Subject"] = "Smoke test"
    msg["Message-ID"] = message_id
    msg.set_content("Hello, list.\n")
    mailman.deliver(mlist.fqdn_listname, msg.as_bytes())

    # The member also gets a welcome message, so match on the post itself.
    try:
        received = smtp_sink.wait_for(
            lambda r: member in r.rcpt_tos
            and r.message["Message-ID"] == message_id,
            timeout=30,
        )
    except TimeoutError as error:
        raise AssertionError("%s\n%s" % (error, mailman.logs_tail())) from None
    copy = received.message
    assert copy["Subject"].endswith("Smoke test")
    assert copy["List-Id"] == "<smoke.smoke.example.org>"
    assert "Hello, list." in copy.get_content()

    spooled = wait_until(mailman.spool_files, timeout=30)
    assert spooled, "nothing in the archiver spool\n" + mailman.logs_tail()
