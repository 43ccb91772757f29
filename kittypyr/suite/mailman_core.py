"""A real GNU Mailman 3 core on loopback, for the suite and the integration tests.

Mailman runs from its own virtualenv (``make mailman-venv``) because its
dependency pins clash with the archive's.  Starting it takes several seconds
and a few hundred megabytes, so the test session starts one instance and
gives each test its own lists.
"""

import atexit
import base64
import email.parser
import email.utils
import os
import signal
import smtplib
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

# The virtualenv ``make mailman-venv`` makes beside the source tree;
# KITTYPYR_MAILMAN_VENV names another.
MAILMAN_VENV = Path(
    os.environ.get("KITTYPYR_MAILMAN_VENV") or Path(__file__).resolve().parents[2] / ".venv-mailman"
)
MAILMAN_BIN = MAILMAN_VENV / "bin" / "mailman"

# Runners needed for a post to reach both the members and the
# archiver.  Each gets its own sleep_time because [runner.master] values do
# not propagate to the individual runner sections.
RUNNERS = ("in", "pipeline", "out", "archive", "virgin", "lmtp", "rest")
# Runners neither the suite nor the tests exercise; leaving them off shortens start-up.
IDLE_RUNNERS = ("bounces", "command", "retry", "task", "digest", "nntp")

START_TIMEOUT = 60.0


def free_port():
    """A loopback port nobody listens on right now.

    There is a window between closing this socket and the server binding
    the port, which is acceptable on a test machine.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_accepts(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def tail(path, lines=40):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(%s: missing)" % path
    return "\n".join(text.splitlines()[-lines:])


MAILMAN_CFG = """\
[mailman]
site_owner: owner@example.com
layout: testing

[paths.testing]
var_dir: {var_dir}

[database]
class: mailman.database.sqlite.SQLiteDatabase
url: sqlite:///$DATA_DIR/mailman.db

[webservice]
hostname: 127.0.0.1
port: {rest_port}
use_https: no
admin_user: {rest_user}
admin_pass: {rest_password}
workers: 1
configuration: {gunicorn_cfg}

[mta]
# The default incoming MTA runs postfix's postmap whenever a list is created.
incoming: mailman.mta.null.NullMTA
outgoing: mailman.mta.deliver.deliver
lmtp_host: 127.0.0.1
lmtp_port: {lmtp_port}
smtp_host: 127.0.0.1
smtp_port: {smtp_port}

[archiver.hyperkitty]
class: mailman_hyperkitty.Archiver
enable: yes
configuration: {plugin_cfg}
{runners}"""

# Mailman's own gunicorn settings give the REST server 30 s to finish
# requests on shutdown; nothing in a test needs more than a moment.
GUNICORN_CFG = """\
[gunicorn]
graceful_timeout = 1
timeout = 60
"""

PLUGIN_CFG = """\
[general]
base_url: {base_url}
api_key: {api_key}
"""


class MailmanError(RuntimeError):
    pass


class MailmanCore:
    """One Mailman core with its own var_dir and loopback ports."""

    rest_user = "restadmin"
    rest_password = "restpass"

    def __init__(self, folder, archiver_base_url, archiver_key, smtp_port):
        self.folder = Path(folder).resolve()
        self.var_dir = self.folder / "var"
        self.cfg_path = self.folder / "mailman.cfg"
        self.plugin_cfg_path = self.folder / "hyperkitty.cfg"
        self.gunicorn_cfg_path = self.folder / "gunicorn.cfg"
        self.command_log = self.folder / "mailman-command.log"
        self.rest_port = free_port()
        self.lmtp_port = free_port()
        self.rest_url = "http://127.0.0.1:%d" % self.rest_port
        self.smtp_port = smtp_port
        self.archiver_base_url = archiver_base_url
        self.archiver_key = archiver_key
        self.master_pid = None
        self.start_seconds = None
        self._started = False
        self._write_config()

    @property
    def log_dir(self):
        return self.var_dir / "logs"

    @property
    def mailman_log(self):
        return self.log_dir / "mailman.log"

    def _write_config(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        self.var_dir.mkdir(parents=True, exist_ok=True)
        runners = []
        for name in RUNNERS:
            runners.append("\n[runner.%s]\nsleep_time: 0.1s\n" % name)
        for name in IDLE_RUNNERS:
            runners.append("\n[runner.%s]\nstart: no\n" % name)
        self.plugin_cfg_path.write_text(
            PLUGIN_CFG.format(
                base_url=self.archiver_base_url, api_key=self.archiver_key
            )
        )
        self.gunicorn_cfg_path.write_text(GUNICORN_CFG)
        self.cfg_path.write_text(
            MAILMAN_CFG.format(
                var_dir=self.var_dir,
                rest_port=self.rest_port,
                rest_user=self.rest_user,
                rest_password=self.rest_password,
                lmtp_port=self.lmtp_port,
                smtp_port=self.smtp_port,
                plugin_cfg=self.plugin_cfg_path,
                gunicorn_cfg=self.gunicorn_cfg_path,
                runners="".join(runners),
            )
        )

    def _environ(self):
        env = dict(os.environ)
        # An inherited var dir would redirect the runners away from this
        # instance's, and Python paths from the test venv would shadow the
        # packages pinned in Mailman's own.
        for name in ("MAILMAN_VAR_DIR", "PYTHONPATH", "PYTHONHOME"):
            env.pop(name, None)
        return env

    def _run_command(self, *args, timeout=60):
        # The forked master inherits our stdout; a pipe would stay open for
        # its whole life and the call would never return.
        with open(self.command_log, "ab") as out:
            return subprocess.run(
                [str(MAILMAN_BIN), "--run-as-root", "-C", str(self.cfg_path)]
                + list(args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._environ(),
                cwd=str(self.folder),
                timeout=timeout,
            )

    def logs_tail(self, lines=40):
        parts = [
            "--- %s\n%s" % (self.command_log, tail(self.command_log, lines))
        ]
        if self.log_dir.is_dir():
            for path in sorted(self.log_dir.glob("*.log")):
                if path.stat().st_size == 0:
                    continue
                parts.append("--- %s\n%s" % (path, tail(path, lines)))
        return "\n".join(parts)

    def _fail(self, reason):
        raise MailmanError("%s\n%s" % (reason, self.logs_tail()))

    def start(self, timeout=START_TIMEOUT):
        if self._started:
            return self
        if not MAILMAN_BIN.exists():
            raise MailmanError(
                "%s is missing; run `make mailman-venv`" % MAILMAN_BIN
            )
        # Lines from a previous run in the same folder must not count as
        # this run's runners having started.
        try:
            log_offset = self.mailman_log.stat().st_size
        except OSError:
            log_offset = 0
        began = time.monotonic()
        deadline = began + timeout
        # A pid file left by a master killed in an earlier run would be read
        # as this run's master having died.
        stale_pid = self._read_pid_file()
        if stale_pid is not None and not _alive(stale_pid):
            (self.var_dir / "master.pid").unlink()
        # Marked started before the command returns: a timeout or failure may
        # still have left a forked master behind for stop() to clean up.
        self._started = True
        atexit.register(self.stop)
        try:
            # --force: that killed master also leaves a lock behind, which
            # would otherwise block every later start in this folder.
            result = self._run_command("start", "--force", timeout=timeout)
            if result.returncode != 0:
                self._fail("`mailman start` exited with %d" % result.returncode)
            self._wait_until_ready(deadline, log_offset)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _wait_until_ready(self, deadline, log_offset):
        waiting_for = "the master's pid file"
        while time.monotonic() < deadline:
            if self.master_pid is None:
                self.master_pid = self._read_pid_file()
            elif not _alive(self.master_pid):
                self._fail("Mailman's master process exited during start-up")
            missing = self._runners_not_started(log_offset)
            if self.master_pid is None:
                waiting_for = "the master's pid file"
            elif missing:
                waiting_for = "runners %s" % ", ".join(sorted(missing))
            elif not self._rest_answers():
                waiting_for = "the REST API"
            elif not port_accepts(self.lmtp_port):
                waiting_for = "the LMTP port"
            else:
                return
            time.sleep(0.2)
        self._fail(
            "Mailman was not ready in time: still waiting for %s" % waiting_for
        )

    def _read_pid_file(self):
        try:
            return int((self.var_dir / "master.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _runners_not_started(self, log_offset):
        try:
            with open(self.mailman_log, "rb") as log:
                log.seek(log_offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        return {
            name for name in RUNNERS if "%s runner started." % name not in text
        }

    def _rest_answers(self):
        # mailmanclient sets no socket timeout, so a port that accepts but
        # never answers (another server on it, a wedged worker) would hang
        # start-up past its deadline.
        request = urllib.request.Request(self.rest_url + "/3.1/system/versions")
        token = base64.b64encode(
            ("%s:%s" % (self.rest_user, self.rest_password)).encode()
        ).decode()
        request.add_header("Authorization", "Basic " + token)
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return response.status == 200
        except (OSError, ValueError):
            return False

    def client(self):
        from mailmanclient import Client

        return Client(self.rest_url + "/3.1", self.rest_user, self.rest_password)

    def deliver(self, list_address, raw_bytes, sender=None):
        """Post raw_bytes to list_address the way an MTA hands mail over."""
        if sender is None:
            headers = email.parser.BytesHeaderParser().parsebytes(raw_bytes)
            sender = email.utils.parseaddr(headers.get("From", ""))[1]
        with smtplib.LMTP("127.0.0.1", self.lmtp_port, timeout=30) as lmtp:
            refused = lmtp.sendmail(sender, [list_address], raw_bytes)
        if refused:
            raise smtplib.SMTPRecipientsRefused(refused)

    def spool_files(self):
        spool = self.var_dir / "archives" / "hyperkitty" / "spool"
        if not spool.is_dir():
            return []
        return sorted(path for path in spool.iterdir() if path.is_file())

    def stop(self, timeout=20.0):
        if not self._started:
            return
        self._started = False
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass
        pid = self.master_pid or self._read_pid_file()
        # Collected before stopping: once the master is killed its runners
        # are reparented and no longer findable through it.
        processes = ([pid] + _descendants(pid)) if pid else []
        try:
            self._run_command("stop", timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        if not _wait_dead(processes, timeout):
            if pid and _alive(pid):
                _signal(pid, signal.SIGTERM)
            if not _wait_dead(processes, 5):
                for process in processes:
                    _signal(process, signal.SIGKILL)
                _wait_dead(processes, 5)
        self.master_pid = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _alive(pid):
    # The master is reparented away from us, and whatever adopts it may not
    # reap it promptly, so a zombie counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state not in ("Z", "X")


def _wait_dead(pids, timeout):
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _descendants(pid):
    found = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            tasks = os.listdir("/proc/%d/task" % parent)
        except OSError:
            continue
        for task in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (parent, task)) as fp:
                    children = [int(child) for child in fp.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(children)
            pending.extend(children)
    return found
