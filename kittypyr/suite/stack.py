"""kittypyr, a real Mailman core and an SMTP server, wired as on a real site.

- Mailman core archives through its ``mailman-hyperkitty`` plugin into a
  kittypyr served by pserve, and asks kittypyr for permalinks.
- kittypyr asks Mailman's REST API for accounts, roles and list details.
- One SMTP server (aiosmtpd) plays the site's MTA: it keeps every mail
  (what members receive, confirmation mail) and passes mail addressed to
  a list on to Mailman over LMTP, as Postfix would.

``make suite`` runs one for people to try (``kittypyr.suite.run``); the
integration tests run one per test session.
"""

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from kittypyr.suite.mailman_core import MailmanCore, free_port
from kittypyr.suite.mta import SMTPSink

# pserve of the virtualenv this code runs in, so the suite serves this
# checkout's kittypyr.
VENV_BIN = Path(sys.executable).parent

ARCHIVE_INI = """\
[app:main]
use = egg:kittypyr
pyramid.reload_templates = false
zodbconn.uri = file://{data}/Data.fs?blobstorage_dir={data}/blobs&connection_cache_size=20000&connection_cache_size_bytes=8MB
retry.attempts = 5
kittypyr.base_url = {base_url}
{settings}

[server:main]
use = egg:waitress#main
listen = 127.0.0.1:{port}

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = {log_level}
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(asctime)s %(levelname)s [%(name)s] %(message)s
"""


def wait_for_port(port, timeout=60, process=None):
    """Return once something accepts connections on loopback ``port``.

    Raises RuntimeError when ``process`` exits first, TimeoutError when
    nothing listens within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on port {port}")


class ArchiveServer:
    """kittypyr served by pserve on a fixed port, which can be stopped and started again."""

    def __init__(self, folder, port=None):
        self.folder = Path(folder)
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/"
        self.log = self.folder / "kittypyr.log"
        self.config = self.folder / "kittypyr.ini"
        self.process = None

    def configure(self, settings, log_level="WARNING"):
        """Write the .ini: the storage in ``folder/var``, ``settings`` a dict of ``kittypyr.*`` values."""
        data = self.folder / "var"
        (data / "blobs").mkdir(parents=True, exist_ok=True)
        self.config.write_text(ARCHIVE_INI.format(
            data=data, base_url=self.base_url, port=self.port, log_level=log_level,
            settings="\n".join(f"{key} = {value}" for key, value in settings.items()),
        ))

    def start(self):
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([str(VENV_BIN / "pserve"), str(self.config)],
                                            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
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


class MailmanStack:
    """The three servers in ``folder``: ``core``, ``sink`` (the MTA) and ``archive``."""

    def __init__(self, folder, archiver_key, secret, admins=(), archive_port=None, smtp_port=None,
                 sync_ttl=2, roles_ttl=2, log_level="WARNING"):
        self.folder = Path(folder)
        self.archiver_key = archiver_key
        self.secret = secret
        self.admins = tuple(admins)
        self.sync_ttl = sync_ttl
        self.roles_ttl = roles_ttl
        self.log_level = log_level
        self.archive = ArchiveServer(self.folder, archive_port)
        self.sink = SMTPSink(relay=self._relay, port=smtp_port)
        self.core = None
        self.lists = set()

    def start(self):
        """Start the MTA, kittypyr, then Mailman (whose plugin posts to kittypyr); return self."""
        self.sink.start()
        self.core = MailmanCore(self.folder / "core", self.archive.base_url, self.archiver_key,
                                self.sink.port)
        self.archive.configure({
            "kittypyr.archiver_key": self.archiver_key,
            "kittypyr.mailman_url": self.core.rest_url,
            "kittypyr.mailman_user": self.core.rest_user,
            "kittypyr.mailman_password": self.core.rest_password,
            "kittypyr.mailman_sync_ttl": self.sync_ttl,
            "kittypyr.mailman_roles_ttl": self.roles_ttl,
            "kittypyr.secret": self.secret,
            "kittypyr.admins": " ".join(self.admins),
            "kittypyr.smtp_host": "127.0.0.1",
            "kittypyr.smtp_port": self.sink.port,
        }, log_level=self.log_level)
        try:
            self.archive.start()
            self.core.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Stop whatever of the three was started."""
        for part in (self.core, self.sink, self.archive):
            if part is not None:
                part.stop()

    def _relay(self, received):
        for list_address in set(received.rcpt_tos) & self.lists:
            self.core.deliver(list_address, received.data, sender=received.mail_from)

    def create_list(self, domain, name, **settings):
        """The list ``name@domain`` in Mailman core (made if missing), whose posts the MTA passes on.

        ``settings`` are Mailman list settings, written whether the list
        is new or not.
        """
        client = self.core.client()
        try:
            mail_domain = client.get_domain(domain)
        except urllib.error.HTTPError:
            mail_domain = client.create_domain(domain)
        try:
            mailing_list = client.get_list(f"{name}@{domain}")
        except urllib.error.HTTPError:
            mailing_list = mail_domain.create_list(name)
        for key, value in settings.items():
            mailing_list.settings[key] = value
        mailing_list.settings.save()
        # Mailman core records a list's archivers on their first use, in
        # whichever process gets there first, and no rule keeps a name once
        # per list: two of its runners handling the first post
        # together can both record one, and from then on every post to the
        # list is shunted. Asking for them now records them, once.
        list(mailing_list.archivers.keys())
        self.lists.add(mailing_list.fqdn_listname)
        return mailing_list

    def create_user(self, address, name, password, *lists, role="member"):
        """A Mailman account with a verified address (made if missing), with ``role`` in ``lists``."""
        client = self.core.client()
        try:
            user = client.get_user(address)
        except urllib.error.HTTPError:
            user = client.create_user(address, password, name)
        client.get_address(address).verify()
        for mailing_list in lists:
            if role == "member":
                if mailing_list.is_member(address):
                    continue
                mailing_list.subscribe(address, name, pre_verified=True, pre_confirmed=True,
                                       pre_approved=True, send_welcome_message=False)
            elif not getattr(mailing_list, f"is_{role}")(address):
                getattr(mailing_list, f"add_{role}")(address)
        return user
