"""kittypyr, a real Mailman core and an SMTP server, wired as on a real site.

- Mailman core archives through its ``mailman-hyperkitty`` plugin into a
  kittypyr served by pserve, and asks kittypyr for permalinks.
- kittypyr asks Mailman's REST API for accounts, roles and list details.
- One SMTP server (aiosmtpd) plays the site's MTA: it keeps every mail
  (what members receive, confirmation mail) and passes mail addressed to
  a list on to Mailman over LMTP, as Postfix would.

Started once per test session (see the ``mailman_stack`` fixture in
conftest.py); each test module makes its own lists.
"""

import subprocess
import time
import urllib.request
from urllib.parse import urljoin

import requests
from bs4 import BeautifulSoup

from tests.functional import VENV_BIN, free_port, wait_for_port, write_config
from tests.mailman_server import MailmanCore, SMTPSink

ARCHIVER_KEY = "archiver-key-for-tests"
SITE_ADMIN = "siteadmin@example.org"


class ArchiveServer:
    """kittypyr served by pserve on a fixed port, which can be stopped and started again."""

    def __init__(self, folder):
        self.folder = folder
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/"
        self.log = folder / "kittypyr.log"
        self.config = None
        self.process = None

    def configure(self, core, smtp_port):
        self.config = write_config(self.folder, port=self.port, extra="\n".join([
            f"kittypyr.archiver_key = {ARCHIVER_KEY}",
            f"kittypyr.mailman_url = {core.rest_url}",
            f"kittypyr.mailman_user = {core.rest_user}",
            f"kittypyr.mailman_password = {core.rest_password}",
            "kittypyr.mailman_sync_ttl = 2",
            "kittypyr.secret = a-secret-for-the-tests",
            f"kittypyr.admins = {SITE_ADMIN}",
            "kittypyr.smtp_host = 127.0.0.1",
            f"kittypyr.smtp_port = {smtp_port}",
        ]))

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
        """``(status, text)`` of an anonymous GET."""
        try:
            with urllib.request.urlopen(self.base_url + path.lstrip("/"), timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, ""

    def reader(self):
        """A browser-like client with its own cookies."""
        return Reader(self.base_url)


class Reader:
    """A reader's HTTP session: GET pages and submit their forms as a browser would."""

    def __init__(self, base_url):
        self.base_url = base_url
        self.http = requests.Session()

    def get(self, path, **kw):
        return self.http.get(urljoin(self.base_url, path.lstrip("/")), timeout=30, allow_redirects=False, **kw)

    def submit(self, path, form_id, **fields):
        """Fill the form ``form_id`` of the page at ``path`` and post it; return the answer."""
        page = self.get(path)
        form = BeautifulSoup(page.text, "html.parser").find("form", id=form_id)
        if form is None:
            raise AssertionError(f"no form {form_id!r} at {path} (status {page.status_code})")
        data = {field["name"]: field.get("value", "") for field in form.find_all("input")
                if field.get("name") and field.get("type") not in ("checkbox", "submit")}
        for textarea in form.find_all("textarea"):
            data[textarea["name"]] = textarea.text
        data.update(fields)
        return self.http.post(urljoin(page.url, form["action"]), data=data, timeout=30, allow_redirects=False)

    def log_in(self, address, password):
        return self.submit("/login", "login-form", address=address, password=password)


class MailmanStack:
    def __init__(self, folder):
        self.archive = ArchiveServer(folder)
        self.sink = SMTPSink(relay=self._relay)
        self.core = None
        self.folder = folder
        self.lists = set()

    def start(self):
        self.sink.start()
        self.core = MailmanCore(self.folder / "core", self.archive.base_url, ARCHIVER_KEY, self.sink.port)
        self.archive.configure(self.core, self.sink.port)
        self.archive.start()
        self.core.start()
        return self

    def stop(self):
        for part in (self.core, self.sink, self.archive):
            if part is not None:
                part.stop()

    def _relay(self, received):
        for list_address in set(received.rcpt_tos) & self.lists:
            self.core.deliver(list_address, received.data, sender=received.mail_from)

    def create_list(self, domain, name, **settings):
        """A list in Mailman core, whose posts this site's MTA passes on to it."""
        client = self.core.client()
        try:
            mail_domain = client.get_domain(domain)
        except Exception:
            mail_domain = client.create_domain(domain)
        mailing_list = mail_domain.create_list(name)
        for key, value in settings.items():
            mailing_list.settings[key] = value
        mailing_list.settings.save()
        self.lists.add(mailing_list.fqdn_listname)
        return mailing_list

    def create_user(self, address, name, password, *lists, role="member"):
        """A Mailman account with a verified address, subscribed to ``lists``."""
        client = self.core.client()
        user = client.create_user(address, password, name)
        client.get_address(address).verify()
        for mailing_list in lists:
            if role == "member":
                mailing_list.subscribe(address, name, pre_verified=True, pre_confirmed=True,
                                       pre_approved=True, send_welcome_message=False)
            else:
                getattr(mailing_list, f"add_{role}")(address)
        return user


def wait_until(predicate, timeout=60, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("the condition did not come true in time")
