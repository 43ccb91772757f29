"""Mailman's archiver plugin under load: is every message answered "200" really stored?

    .venv/bin/python bench/archiver_load.py CORPUS [--clients 4] [--messages 2000]
        [--setup filestorage|zeo|both] [--kill-at N] [--restart-zeo-at N]

Posts ``--messages`` real messages of CORPUS (an mbox, Maildir or Pipermail
file) from ``--clients`` concurrent clients to ``api/mailman/archive``, the
way the ``mailman-hyperkitty`` plugin does: a multipart form with ``mlist``
and the ``message`` file, the archiver key in ``Authorization``, and any
answer but a 200 makes the client keep the message and send it again later.

Two set-ups, on loopback only: (a) one waitress process on a FileStorage,
(b) two waitress processes on one ZEO server, the clients spreading their
requests over both. ``--kill-at N`` kills one process with SIGKILL after N
answers and starts it again; ``--restart-zeo-at N`` restarts the ZEO server
after N answers. Then the servers stop, the storage is opened and each
message looked for. Printed per set-up: answers 200 and 5xx, messages
present, answered 200 but absent (must be 0), duplicates (must be 0),
requests retried after a conflict (from the servers' logs), conflict
resolution failures logged, msg/s and p50/p95 latency of the 200 answers.

Bounded: each message is sent at most ``--max-attempts`` times and the run
stops after ``--time-limit`` seconds whatever happens.
"""

import argparse
import collections
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import requests  # noqa: E402

from tests.functional import VENV_BIN, free_port, wait_for_port  # noqa: E402

LIST = "load@lists.example.org"
KEY = "archiver-load-key"

CONFIG = """[app:main]
use = egg:kittypyr
zodbconn.uri = {uri}
retry.attempts = 3
kittypyr.base_url = http://127.0.0.1:{port}/
kittypyr.archiver_key = {key}
kittypyr.mailman_url =
kittypyr.secret = archiver-load-bench

[server:main]
use = egg:waitress#main
listen = 127.0.0.1:{port}
threads = 4

[loggers]
keys = root, kittypyr, conflicts

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARNING
handlers = console

[logger_kittypyr]
level = INFO
handlers =
qualname = kittypyr

[logger_conflicts]
level = INFO
handlers =
qualname = ZODB.ConflictResolution

[handler_console]
class = StreamHandler
args = (sys.stderr,)
level = NOTSET
formatter = generic

[formatter_generic]
format = %(asctime)s %(levelname)s [%(name)s] %(message)s
"""


def pick_messages(corpus, count):
    """The first ``count`` messages of ``corpus`` with a Message-ID of their own: [(hash, bytes)]."""
    from kittypyr.mail import UnparseableMessage, parse_message
    from kittypyr.mailboxes import read_mail
    from kittypyr.msgid import message_id_hash

    chosen, seen = [], set()
    for raw_mail in read_mail(corpus):
        try:
            parsed = parse_message(raw_mail.raw)
        except UnparseableMessage:
            continue
        if parsed.message_id_derived or parsed.no_archive:
            continue
        name = message_id_hash(parsed.message_id)
        if name in seen:
            continue
        seen.add(name)
        chosen.append((name, raw_mail.raw))
        if len(chosen) == count:
            break
    return chosen


class Process:
    """One pserve process on ``config``, which can be killed and started again."""

    def __init__(self, config, port, log):
        self.config, self.port, self.log = config, port, log
        self.popen = None

    def start(self):
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen([str(VENV_BIN / "pserve"), str(self.config)], stdout=log, stderr=log)
        wait_for_port(self.port, timeout=120, process=self.popen)

    def kill(self):
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()

    def stop(self):
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(timeout=60)


class ZEOServer:
    def __init__(self, folder):
        self.folder = folder
        self.port = free_port()
        self.conf = folder / "zeo.conf"
        self.conf.write_text(f"<zeo>\n  address 127.0.0.1:{self.port}\n</zeo>\n<filestorage 1>\n"
                             f"  path {folder}/Data.fs\n  blob-dir {folder}/blobs\n</filestorage>\n")
        self.popen = None

    def start(self):
        with open(self.folder / "zeo.log", "ab") as log:
            self.popen = subprocess.Popen([str(VENV_BIN / "runzeo"), "-C", str(self.conf)], stdout=log, stderr=log)
        wait_for_port(self.port, process=self.popen)

    def stop(self):
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(timeout=60)


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.statuses = collections.Counter()
        self.latencies = []
        self.answered = 0
        self.stored_claims = set()

    def record(self, name, status, seconds):
        with self.lock:
            self.statuses[status] += 1
            self.answered += 1
            if status == 200:
                self.latencies.append(seconds)
                self.stored_claims.add(name)
            return self.answered


def run_clients(messages, ports, clients, max_attempts, time_limit, on_answer):
    """Send every message until it is answered 200 (or attempts run out); return the Tally."""
    work = queue.Queue()
    for item in messages:
        work.put((item, 0))
    tally = Tally()
    pending = [len(messages)]
    pending_lock = threading.Lock()
    deadline = time.monotonic() + time_limit
    given_up = []

    def finish_one():
        with pending_lock:
            pending[0] -= 1

    def client(number):
        session = requests.Session()
        turn = number
        while time.monotonic() < deadline:
            with pending_lock:
                if pending[0] == 0:
                    return
            try:
                (name, raw), attempts = work.get(timeout=0.2)
            except queue.Empty:
                continue
            port = ports[turn % len(ports)]
            turn += 1
            started = time.monotonic()
            try:
                answer = session.post(f"http://127.0.0.1:{port}/api/mailman/archive",
                                      data={"mlist": LIST}, files={"message": ("message.txt", raw)},
                                      headers={"Authorization": f"Token {KEY}"}, timeout=60)
                status = answer.status_code
            except requests.RequestException:
                status = "no answer"
            answered = tally.record(name, status, time.monotonic() - started)
            on_answer(answered)
            if status == 200:
                finish_one()
            elif attempts + 1 >= max_attempts:
                given_up.append(name)
                finish_one()
            else:
                # As the plugin does: keep it and send it again later
                # (Mailman's plugin: with the next message, seconds later).
                time.sleep(min(0.05 * 2 ** attempts, 2.0))
                work.put(((name, raw), attempts + 1))

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tally.elapsed = time.monotonic() - started
    tally.given_up = given_up
    return tally


def stored_hashes(data_fs, blobs):
    """Every message hash of the list in the storage, opened after the servers stopped."""
    from ZODB import DB
    from ZODB.FileStorage import FileStorage

    from kittypyr.bootstrap import ROOT_KEY

    db = DB(FileStorage(str(data_fs), blob_dir=str(blobs), read_only=True))
    try:
        connection = db.open()
        archive = connection.root()[ROOT_KEY]
        mailing_list = archive.lists.get(LIST)
        names = list(mailing_list.messages.keys()) if mailing_list is not None else []
        quarantined = len(archive.quarantine)
        connection.close()
    finally:
        db.close()
    return names, quarantined


def log_counts(folder):
    retried = conflict_failures = 0
    for log in folder.glob("server-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if "[kittypyr.retries] retrying" in line:
                retried += 1
            elif "Unexpected error while trying to resolve conflict" in line:
                conflict_failures += 1
    return retried, conflict_failures


def run_setup(kind, messages, args):
    folder = Path(tempfile.mkdtemp(prefix=f"kittypyr-archiver-load-{kind}-"))
    (folder / "blobs").mkdir()
    zeo = None
    if kind == "zeo":
        zeo = ZEOServer(folder)
        zeo.start()
        uri_of = lambda port: f"zeo://127.0.0.1:{zeo.port}?blob_dir={folder}/zeo-client-blobs-{port}&shared_blob_dir=false"  # noqa: E731
        count = 2
    else:
        uri_of = lambda port: f"file://{folder}/Data.fs?blobstorage_dir={folder}/blobs"  # noqa: E731
        count = 1
    processes = []
    for number in range(count):
        port = free_port()
        config = folder / f"server-{number}.ini"
        config.write_text(CONFIG.format(uri=uri_of(port), port=port, key=KEY))
        processes.append(Process(config, port, folder / f"server-{number}.log"))
    for process in processes:
        process.start()
    faults = []
    fault_lock = threading.Lock()

    def on_answer(answered):
        with fault_lock:
            if args.kill_at and answered == args.kill_at:
                victim = processes[-1]
                victim.kill()
                faults.append(f"killed one process (SIGKILL) after {answered} answers")
                victim.start()
            if args.restart_zeo_at and answered == args.restart_zeo_at and zeo is not None:
                zeo.stop()
                zeo.start()
                faults.append(f"restarted the ZEO server after {answered} answers")

    try:
        tally = run_clients(messages, [p.port for p in processes], args.clients, args.max_attempts,
                            args.time_limit, on_answer)
    finally:
        for process in processes:
            process.stop()
        if zeo is not None:
            zeo.stop()
    names, quarantined = stored_hashes(folder / "Data.fs", folder / "blobs")
    present = set(names)
    sent = {name for name, _ in messages}
    retried, conflict_failures = log_counts(folder)
    latencies = sorted(tally.latencies)
    five_xx = sum(n for status, n in tally.statuses.items() if isinstance(status, int) and status >= 500)
    other = {str(s): n for s, n in tally.statuses.items() if s != 200 and not (isinstance(s, int) and s >= 500)}
    print(f"\n== {kind}: {len(processes)} waitress process(es), {args.clients} clients, {len(messages)} messages")
    for fault in faults:
        print(f"   fault: {fault}")
    print(f"   answered 200: {tally.statuses[200]}   5xx: {five_xx}   other: {other or 0}")
    print(f"   present in the archive: {len(present & sent)} of {len(sent)}   quarantined: {quarantined}")
    print(f"   answered 200 but absent: {len(tally.stored_claims - present)}  (must be 0)")
    print(f"   duplicates: {len(names) - len(present & sent)}  (must be 0)")
    print(f"   never answered 200 (gave up after {args.max_attempts} attempts): {len(tally.given_up)}")
    print(f"   requests retried after a conflict: {retried}   conflict resolution errors logged: {conflict_failures}")
    if latencies:
        p50 = statistics.median(latencies) * 1000
        p95 = latencies[int(len(latencies) * 0.95) - 1] * 1000
        print(f"   {tally.statuses[200] / tally.elapsed:.1f} msg/s   p50 {p50:.0f} ms   p95 {p95:.0f} ms")
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"   (kept in {folder})")
    return len(tally.stored_claims - present) == 0 and len(names) == len(present & sent)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="an mbox (.gz), Maildir or Pipermail file of real mail")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--setup", choices=("filestorage", "zeo", "both"), default="both")
    parser.add_argument("--kill-at", type=int, default=0, help="SIGKILL one process after N answers")
    parser.add_argument("--restart-zeo-at", type=int, default=0, help="restart the ZEO server after N answers")
    parser.add_argument("--max-attempts", type=int, default=20, help="sends of one message at most")
    parser.add_argument("--time-limit", type=float, default=900, help="seconds per set-up at most")
    parser.add_argument("--keep", action="store_true", help="keep the storage and the servers' logs")
    args = parser.parse_args()
    messages = pick_messages(args.corpus, args.messages)
    print(f"{len(messages)} messages with distinct Message-IDs from {args.corpus}")
    kinds = ("filestorage", "zeo") if args.setup == "both" else (args.setup,)
    ok = all([run_setup(kind, messages, args) for kind in kinds])
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
