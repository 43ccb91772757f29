"""kittypyr as the archiver of a real Mailman core (started by tests/mailman_server.py)."""

import email
import subprocess
import time
import urllib.request

import pytest

from kittypyr.msgid import message_id_hash
from tests.functional import VENV_BIN, free_port, wait_for_port, write_config
from tests.mailbuilder import make_message
from tests.mailman_server import MailmanCore, SMTPSink

KEY = "archiver-key-for-tests"
DOMAIN = "lists.example.org"
LIST = f"dev@{DOMAIN}"
MEMBER = "member@example.org"


class Kittypyr:
    """kittypyr served by pserve on a fixed port, which can be stopped and started again."""

    def __init__(self, folder):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/"
        self.config = write_config(folder, port=self.port, extra=f"kittypyr.archiver_key = {KEY}")
        self.log = folder / "kittypyr.log"
        self.process = None

    def point_at(self, core):
        """Tell kittypyr where Mailman core's REST API is (known once core has started)."""
        text = self.config.read_text().replace(
            f"kittypyr.archiver_key = {KEY}",
            f"kittypyr.archiver_key = {KEY}\nkittypyr.mailman_url = {core.rest_url}\n"
            f"kittypyr.mailman_user = {core.rest_user}\nkittypyr.mailman_password = {core.rest_password}",
        )
        self.config.write_text(text)

    def start(self):
        log = open(self.log, "ab")
        self.process = subprocess.Popen([str(VENV_BIN / "pserve"), str(self.config)], stdout=log, stderr=log)
        wait_for_port(self.port, process=self.process)

    def stop(self):
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def get(self, path):
        try:
            with urllib.request.urlopen(self.base_url + path.lstrip("/"), timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, ""


def wait_until(predicate, timeout=60, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("the condition did not come true in time")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mailman")
    archive = Kittypyr(folder)
    archive.start()
    sink = SMTPSink()
    sink.start()
    core = MailmanCore(folder / "core", archive.base_url, KEY, sink.port)
    core.start()
    archive.stop()
    archive.point_at(core)
    archive.start()
    try:
        client = core.client()
        domain = client.create_domain(DOMAIN)
        mailing_list = domain.create_list("dev")
        mailing_list.settings["archive_policy"] = "public"
        mailing_list.settings["description"] = "Where the developers talk"
        mailing_list.settings.save()
        mailing_list.subscribe(MEMBER, "Member", pre_verified=True, pre_confirmed=True, pre_approved=True)
        yield archive, core, sink
    finally:
        core.stop()
        sink.stop()
        archive.stop()


def post(core, n, subject):
    raw = make_message(message_id=f"<mm{n}@example.org>", subject=subject, sender=("Member", MEMBER),
                       to=LIST, body=f"Posted through Mailman, number {n}.\n")
    core.deliver(LIST, raw)
    return f"list/{LIST}/message/{message_id_hash(f'<mm{n}@example.org>')}/"


def test_mailman_archives_through_the_plugin_and_links_the_permalink(stack):
    archive, core, sink = stack
    path = post(core, 1, "Through the real plugin")
    status, page = wait_until(lambda: (lambda r: r if r[0] == 200 else None)(archive.get(path)))
    assert "Through the real plugin" in page
    delivered = sink.wait_for(lambda m: MEMBER in m.rcpt_tos and b"Through the real plugin" in m.data,
                              timeout=60)
    copy = email.message_from_bytes(delivered.data)
    assert "".join(copy["Archived-At"].split()).strip("<>") == archive.base_url + path
    # The list was created on its first message, with its details from Mailman.
    status, overview = archive.get(f"list/{LIST}/")
    assert status == 200 and "Where the developers talk" in overview


def test_messages_wait_in_mailman_while_kittypyr_is_down(stack):
    archive, core, sink = stack
    archive.stop()
    first = post(core, 2, "Sent while the archive was down")
    wait_until(lambda: core.spool_files(), timeout=60)
    archive.start()
    second = post(core, 3, "Sent after it came back")
    for path in (first, second):
        assert wait_until(lambda p=path: archive.get(p)[0] == 200, timeout=60)
    assert wait_until(lambda: not core.spool_files(), timeout=30)
