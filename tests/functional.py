"""Helpers for tests that run kittypyr as a user does: .ini files, processes, mboxes."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=30, process=None):
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


@contextlib.contextmanager
def zeo_server_in(folder):
    """Run a ZEO server (the ZEO package's runzeo) on ``folder``; yield its port."""
    folder = Path(folder)
    port = free_port()
    conf = folder / "zeo.conf"
    conf.write_text(
        f"""<zeo>
  address 127.0.0.1:{port}
</zeo>
<filestorage 1>
  path {folder}/Data.fs
  blob-dir {folder}/blobs
</filestorage>
"""
    )
    log = open(folder / "zeo.log", "wb")
    server = subprocess.Popen([str(VENV_BIN / "runzeo"), "-C", str(conf)], stdout=log, stderr=log)
    try:
        wait_for_port(port, process=server)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@contextlib.contextmanager
def served(config, port, env=None):
    """pserve on ``config`` (listening on ``port``) while the block runs; yield its base URL."""
    log = open(Path(config).parent / "server.log", "ab")
    process = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=log, stderr=log, env=env)
    try:
        wait_for_port(port, process=process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def write_config(folder, uri=None, port=None, includes="", extra=""):
    """Write an .ini like development.ini into ``folder``; return its path."""
    folder = Path(folder)
    (folder / "var").mkdir(exist_ok=True)
    if uri is None:
        uri = f"file://{folder}/var/Data.fs?blobstorage_dir={folder}/var/blobs"
    path = folder / "kittypyr.ini"
    path.write_text(
        f"""[app:main]
use = egg:kittypyr
pyramid.includes = {includes}
zodbconn.uri = {uri}
retry.attempts = 5
kittypyr.base_url = http://127.0.0.1:{port or 6543}/
{extra}

[server:main]
use = egg:waitress#main
listen = 127.0.0.1:{port or 6543}

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARNING
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(levelname)s [%(name)s] %(message)s
"""
    )
    return path


def answered_apart(function, *args, timeout=120):
    """What ``function`` ("module:name") returns for ``args``, run in a process of its own.

    For input made to keep a process busy for hours: run apart, such a
    wait fails the test instead of holding up the suite. Arguments and
    answer go through JSON.
    """
    module, name = function.split(":")
    program = (f"import json, sys\nfrom {module} import {name}\n"
               f"print(json.dumps({name}(*json.load(sys.stdin))))")
    done = subprocess.run([sys.executable, "-c", program], input=json.dumps(args), capture_output=True,
                          text=True, timeout=timeout, check=True)
    return json.loads(done.stdout)


def kittypyr(*args, check=False, **kw):
    """Run the ``kittypyr`` command; return the CompletedProcess."""
    result = subprocess.run(
        [str(VENV_BIN / "kittypyr"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 600),
        env={**os.environ, **kw.pop("env", {})},
        **kw,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kittypyr {args} failed:\n{result.stdout}\n{result.stderr}")
    return result


def mbox_bytes(messages, quote="mboxrd"):
    """An mbox of raw messages, From_ lines quoted the mboxrd way."""
    out = []
    for raw in messages:
        out.append(b"From someone@example.org Thu Jan  1 00:00:00 2020\n")
        body = raw.replace(b"\r\n", b"\n")
        if body.endswith(b"\n"):
            body = body[:-1]
        for line in body.split(b"\n"):
            stripped = line.lstrip(b">")
            if stripped.startswith(b"From ") and (quote == "mboxrd" or stripped is line):
                line = b">" + line
            out.append(line + b"\n")
        out.append(b"\n")
    return b"".join(out)


@contextlib.contextmanager
def imported_and_served(folder, list_address, messages):
    """``messages`` imported with ``kittypyr import`` into a new archive in ``folder``, served by pserve.

    Yields the base URL; the browser tests use it to see pages as a reader does.
    """
    folder = Path(folder)
    port = free_port()
    config = write_config(folder, port=port)
    mbox = folder / "fixture.mbox"
    mbox.write_bytes(mbox_bytes(messages))
    kittypyr("import", config, list_address, mbox, check=True)
    with served(config, port) as url:
        yield url


def assert_faults_answered_503_and_no_mail_lost(tmp_path, uri_of, faults, list_address):
    """Mail posted by four senders and pages read by three readers from pserve while ``faults()`` runs.

    Each answer is 200 or "come back" (503 with Retry-After), never 500; a
    sender sends its mail again until it is answered 200, as Mailman does;
    each mail answered 200 is stored, once, as another process finds
    afterwards. ``uri_of(folder)`` is the storage's URI for a process there.
    ``faults()`` may return the spans of ``time.monotonic()`` during which
    the storage was certainly away: no mail sent within one is answered 200
    before it ends.
    """
    import requests

    from kittypyr.msgid import message_id_hash
    from tests.mailbuilder import make_message

    port = free_port()
    web = tmp_path / "web"
    web.mkdir()
    # Warmed up as production.ini has it: its templates compiled before the
    # port opens, not by the first requests at once (CPython 3.11's compiler
    # can fail when threads compile at the same moment).
    config = write_config(web, uri=uri_of(web), port=port,
                          extra="kittypyr.archiver_key = fault-key\nkittypyr.warm_up = true")
    answers = []  # (what, status, Retry-After, sent, answered), times by time.monotonic()
    stored = []  # Message-IDs answered 200
    stop = threading.Event()

    def post(base, message_id):
        mail = make_message(message_id=f"<{message_id}@example.org>", subject=f"Mail {message_id}",
                            body="Sent while the storage restarts.\n")
        sent = time.monotonic()
        answer = requests.post(f"{base}/api/mailman/archive", data={"mlist": list_address},
                               files={"message": ("message.txt", mail)},
                               headers={"Authorization": "Token fault-key"}, timeout=60)
        answers.append(("archive", answer.status_code, answer.headers.get("Retry-After"), sent, time.monotonic()))
        if answer.status_code == 200:
            stored.append(message_id)
        return answer.status_code

    def sender(base, number):
        sent = 0
        while not stop.is_set():
            if post(base, f"restart-{number}-{sent}") == 200:
                sent += 1
            else:
                time.sleep(0.05)  # Mailman keeps the mail and sends it again

    def reader(base):
        while not stop.is_set():
            for path in (f"/list/{list_address}/", "/", f"/search?q=restarts&mlist={list_address}"):
                sent = time.monotonic()
                answer = requests.get(base + path, timeout=60)
                answers.append((path, answer.status_code, answer.headers.get("Retry-After"), sent, time.monotonic()))

    with served(config, port) as base:
        assert post(base, "restart-first") == 200
        clients = [threading.Thread(target=sender, args=(base, number)) for number in range(4)]
        clients += [threading.Thread(target=reader, args=(base,)) for _ in range(3)]
        for client in clients:
            client.start()
        try:
            outages = faults() or ()
            time.sleep(2)
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=120)

    wrong = [(what, status) for what, status, retry_after, _, _ in answers
             if not (status == 200 or (status == 503 and retry_after))]
    assert wrong == [], wrong[:10]
    stored_while_away = [(sent, answered) for what, status, _, sent, answered in answers for away, back in outages
                         if what == "archive" and status == 200 and away <= sent and answered < back]
    assert stored_while_away == [], stored_while_away[:5]
    # Felt by some request: answered 503, or held from the first half of an
    # outage until its end. On a busy machine the server's four threads may
    # all be held by requests waiting out the outage, the others queued
    # behind them, and none be answered 503.
    held = any(sent < (away + back) / 2 and answered >= back
               for _, _, _, sent, answered in answers for away, back in outages)
    assert held or 503 in {status for _, status, *_ in answers}, "the faults were not felt"
    assert len(stored) == len(set(stored)) > 20, (len(stored), len(set(stored)))

    port = free_port()
    other = tmp_path / "other"
    other.mkdir()
    with served(write_config(other, uri=uri_of(other), port=port), port) as base:
        missing = [message_id for message_id in stored
                   if f"Mail {message_id}" not in requests.get(
                       f"{base}/list/{list_address}/message/{message_id_hash(f'<{message_id}@example.org>')}/",
                       timeout=60).text]
        assert missing == [], missing
        assert f"{len(stored)} messages" in requests.get(f"{base}/list/{list_address}/", timeout=60).text
