"""Readers and Mailman's archiver at once, on several processes: throughput, latency, nothing lost.

    .venv/bin/python bench/load.py CORPUS [--data DIR] [--setups filestorage,zeo,relstorage]
        [--processes 4] [--readers 8] [--duration 90] [--write-rate 20] [--faults]

The corpus is imported once into DIR (kept for the next run), less its last
``--held-back`` messages, which arrive during the run through the archiver
API the way Mailman's plugin posts them (bench/archiver_load.py): one every
1/``--write-rate`` seconds, and any answer but 200 keeps the message to be
sent again. Meanwhile ``--readers`` client threads fetch, as fast as they
are answered, the pages readers fetch: the list's overview, a month, a
thread, a message and a search, chosen at random from the archive. The
clients spread over the processes as a proxy does, and as nginx's
``proxy_next_upstream`` does they send a request that found no process
listening to the next one; a 503 is sent again after a pause.

Set-ups, each on a fresh copy of the imported archive, on loopback only:
one waitress process on a FileStorage; ``--processes`` processes on one ZEO
server; as many on RelStorage in a PostgreSQL cluster of the benchmark's own
(Debian's server, tests/postgresql_server.py). ``--faults`` adds runs where,
at 40% of the run, one app process is killed with SIGKILL (and started
again), the ZEO server is restarted, or PostgreSQL is.

Printed per run: reader throughput, p50 / p99 per page kind, errors (must be
0), 503s and refused connections retried by the clients, the archiver's
msg/s and its 503s; then, with the servers stopped, the storage opened and
every posted message looked for: answered 200 but missing (must be 0), lost
(sent, never stored), duplicates (must be 0), and whether the list's count,
its threads and the catalog agree with its messages.

Bounded: each run stops after ``--duration`` seconds of load (or
``--max-requests`` reader requests), each message is sent at most
``--max-attempts`` times, and a run is abandoned after ``--time-limit``.
"""

import argparse
import collections
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import requests  # noqa: E402
from archiver_load import CONFIG, KEY, LIST, Process, ZEOServer, log_counts  # noqa: E402
from common import process_memory_mb, production_cache  # noqa: E402

from tests.functional import free_port, kittypyr, mbox_bytes, write_config  # noqa: E402
from tests.postgresql_server import PostgreSQLServer  # noqa: E402

KINDS = ("overview", "month", "thread", "message", "search")
# Words a linux-mips reader searches for; any corpus finds some of them.
SEARCH_WORDS = ("cache", "kernel", "patch", "tlb", "irq", "smp", "octeon", "malta", "gcc", "binutils",
                "highmem", "interrupt", "bootloader", "endian", "mips64", "timer", "pci", "module")


# -- preparing the archive once --------------------------------------------------------------------

def split_corpus(corpus, held_back):
    """(raw messages to import, [(hash, raw)] of the last ``held_back`` with Message-IDs of their own)."""
    from kittypyr.mail import UnparseableMessage, parse_message
    from kittypyr.mailboxes import read_mail
    from kittypyr.msgid import message_id_hash

    raws = [m.raw for m in read_mail(corpus)]
    later, seen, cut = [], set(), len(raws)
    while cut > 0 and len(later) < held_back:
        cut -= 1
        try:
            parsed = parse_message(raws[cut])
        except UnparseableMessage:
            continue
        if parsed.message_id_derived or parsed.no_archive:
            continue
        name = message_id_hash(parsed.message_id)
        if name not in seen:
            seen.add(name)
            later.append((name, raws[cut]))
    later.reverse()
    # Duplicates of a held-back message stay out of the import too, so
    # that every posted message is new to the archive.
    held = {raw for _, raw in later}
    return [raw for raw in raws[:cut] if raw not in held], later


def pick_urls(data_fs, blobs, seed=15):
    """Paths of each page kind, drawn from the archive: {kind: [path]}."""
    from ZODB import DB
    from ZODB.FileStorage import FileStorage

    from kittypyr.bootstrap import ROOT_KEY

    db = DB(FileStorage(str(data_fs), blob_dir=str(blobs), read_only=True))
    try:
        archive = db.open().root()[ROOT_KEY]
        mailing_list = archive.lists[LIST]
        base = f"/list/{LIST}/"
        chance = random.Random(seed)
        thread_keys = chance.sample(list(mailing_list.threads.keys()), 300)
        message_keys = chance.sample(list(mailing_list.messages.keys()), 300)
        months = [m for m, n in mailing_list.activity.per_month.items() if n]
        return {
            "overview": [base],
            "month": [f"{base}{m[:4]}/{int(m[5:7])}/" for m in months],
            "thread": [f"{base}thread/{key}/" for key in thread_keys],
            "message": [f"{base}message/{key}/" for key in message_keys],
            "search": ["/search?" + urllib.parse.urlencode({"q": word, "mlist": LIST}) for word in SEARCH_WORDS],
        }, len(mailing_list.messages)
    finally:
        db.close()


def prepare(data, corpus, held_back, want_relstorage):
    """Import the corpus (once) into DIR/base and, when wanted, a PostgreSQL database ``base``."""
    data.mkdir(parents=True, exist_ok=True)
    later_file = data / "later.json"
    base = data / "base"
    if not later_file.exists():
        print(f"reading {corpus} ...", flush=True)
        imported, later = split_corpus(corpus, held_back)
        (data / "base.mbox").write_bytes(mbox_bytes(imported))
        later_file.write_text(json.dumps([(name, raw.decode("latin-1")) for name, raw in later]))
        if base.exists():
            shutil.rmtree(base)
    later = [(name, raw.encode("latin-1")) for name, raw in json.loads(later_file.read_text())]
    if not (base / "var" / "Data.fs").exists():
        base.mkdir(exist_ok=True)
        config = write_config(base)
        started = time.monotonic()
        print("importing into a FileStorage ...", flush=True)
        kittypyr("import", config, LIST, data / "base.mbox", "--policy", "public", "--quiet", check=True,
                 timeout=7200)
        print(f"   {time.monotonic() - started:.0f} s", flush=True)
    urls_file = data / "urls.json"
    if not urls_file.exists():
        urls, count = pick_urls(base / "var" / "Data.fs", base / "var" / "blobs")
        urls_file.write_text(json.dumps({"urls": urls, "messages": count}))
    chosen = json.loads(urls_file.read_text())
    if want_relstorage:
        with PostgreSQLServer(data / "postgresql") as server:
            if not server.has_database("base"):
                server.create_database("base")
                folder = data / "pg-import"
                folder.mkdir(exist_ok=True)
                config = write_config(folder, uri=server.uri("base", folder / "blob-cache"))
                started = time.monotonic()
                print("importing into RelStorage (PostgreSQL) ...", flush=True)
                kittypyr("import", config, LIST, data / "base.mbox", "--policy", "public", "--quiet",
                         check=True, timeout=7200)
                print(f"   {time.monotonic() - started:.0f} s", flush=True)
    return chosen["urls"], chosen["messages"], later


# -- the clients ---------------------------------------------------------------------------------

class Figures:
    """What the clients saw, shared by their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = collections.defaultdict(list)
        self.statuses = collections.Counter()
        self.retried_503 = 0
        self.retried_refused = 0
        self.errors = []
        self.posted = collections.Counter()
        self.post_503 = 0
        self.post_latencies = []
        self.stored_claims = set()
        self.given_up = []


class Readers:
    """Closed-loop readers: each thread fetches one page after another as fast as it is answered."""

    def __init__(self, ports, urls, figures, deadline, max_requests, count):
        self.ports, self.urls, self.figures = ports, urls, figures
        self.deadline, self.budget, self.count = deadline, max_requests, count
        self.requests = 0
        self.stopped = threading.Event()

    def _take(self):
        with self.figures.lock:
            self.requests += 1
            return self.requests <= self.budget

    def _fetch(self, connections, turn, path):
        """(status, seconds, turn) of one page, trying the next process when none listens."""
        for attempt in range(len(self.ports) * 3):
            port = self.ports[turn % len(self.ports)]
            connection = connections.get(port)
            if connection is None:
                connection = connections[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            started = time.perf_counter()
            try:
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                return response.status, time.perf_counter() - started, turn
            except (OSError, http.client.HTTPException):
                connection.close()
                connections.pop(port, None)
                with self.figures.lock:
                    self.figures.retried_refused += 1
                turn += 1
                time.sleep(0.05)
        return "no answer", 0.0, turn

    def reader(self, number):
        chance = random.Random(number)
        connections = {}
        turn = number
        while time.monotonic() < self.deadline and not self.stopped.is_set() and self._take():
            kind = KINDS[chance.randrange(len(KINDS))]
            path = chance.choice(self.urls[kind])
            for attempt in range(20):
                status, seconds, turn = self._fetch(connections, turn, path)
                if status != 503:
                    break
                with self.figures.lock:
                    self.figures.retried_503 += 1
                time.sleep(0.2)
            with self.figures.lock:
                self.figures.statuses[status] += 1
                if status == 200:
                    self.figures.latencies[kind].append(seconds)
                elif status not in (301, 302, 303):
                    self.figures.errors.append((kind, path, status))
            turn += 1
        for connection in connections.values():
            connection.close()

    def start(self):
        self.threads = [threading.Thread(target=self.reader, args=(n,), daemon=True) for n in range(self.count)]
        for thread in self.threads:
            thread.start()

    def join(self):
        for thread in self.threads:
            thread.join(timeout=120)


class Archiver:
    """Mailman's plugin at ``rate`` messages a second: keeps what was not answered 200 and sends it again."""

    def __init__(self, ports, messages, rate, figures, deadline, max_attempts, senders):
        self.ports, self.figures, self.deadline, self.max_attempts = ports, figures, deadline, max_attempts
        self.messages, self.rate, self.senders = messages, rate, senders
        self.work = collections.deque()
        self.condition = threading.Condition()
        self.outstanding = 0
        self.done = threading.Event()
        self.grace = 120

    def _send(self, session, name, raw, turn):
        port = self.ports[turn % len(self.ports)]
        started = time.perf_counter()
        try:
            answer = session.post(f"http://127.0.0.1:{port}/api/mailman/archive",
                                  data={"mlist": LIST}, files={"message": ("message.txt", raw)},
                                  headers={"Authorization": f"Token {KEY}"}, timeout=60)
            return answer.status_code, time.perf_counter() - started
        except requests.RequestException:
            return "no answer", 0.0

    def sender(self, number):
        session = requests.Session()
        turn = number
        while True:
            with self.condition:
                while not self.work and not self.done.is_set():
                    self.condition.wait(timeout=0.2)
                if not self.work:
                    return
                (name, raw), attempts, not_before = self.work.popleft()
            pause = not_before - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            status, seconds = self._send(session, name, raw, turn)
            turn += 1
            with self.figures.lock:
                self.figures.posted[status] += 1
                if status == 200:
                    self.figures.post_latencies.append(seconds)
                    self.figures.stored_claims.add(name)
                elif status == 503:
                    self.figures.post_503 += 1
            if status == 200:
                self._finish()
            elif attempts + 1 >= self.max_attempts or time.monotonic() > self.deadline + self.grace:
                # Still in Mailman's queue: it would send it again later.
                with self.figures.lock:
                    self.figures.given_up.append(name)
                self._finish()
            else:
                # Mailman keeps the message and sends it again later.
                with self.condition:
                    self.work.append(((name, raw), attempts + 1,
                                      time.monotonic() + min(0.1 * 2 ** attempts, 3.0)))
                    self.condition.notify()

    def _finish(self):
        with self.condition:
            self.outstanding -= 1
            self.condition.notify_all()

    def schedule(self):
        started = time.monotonic()
        self.sent = 0
        for n, item in enumerate(self.messages):
            due = started + n / self.rate
            if due > self.deadline:
                break
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            with self.condition:
                self.outstanding += 1
                self.sent += 1
                self.work.append((item, 0, 0.0))
                self.condition.notify()
        # Everything scheduled is sent until it is stored or given up.
        with self.condition:
            while self.outstanding > 0:
                self.condition.wait(timeout=1)
        self.done.set()
        with self.condition:
            self.condition.notify_all()

    def start(self):
        self.threads = [threading.Thread(target=self.sender, args=(n,), daemon=True) for n in range(self.senders)]
        for thread in self.threads:
            thread.start()
        self.scheduler = threading.Thread(target=self.schedule, daemon=True)
        self.scheduler.start()

    def join(self, timeout):
        self.scheduler.join(timeout=timeout)
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=60)


# -- one run ---------------------------------------------------------------------------------------

def percentile(values, fraction):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * fraction))] * 1000


def warm_up(ports, urls):
    """Each process answers each page kind a few times before the clock starts (not measured)."""
    for port in ports:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for kind in KINDS:
            for path in urls[kind][:3]:
                connection.request("GET", path)
                connection.getresponse().read()
        connection.close()


def verify(db, posted, base_count, stored_claims):
    """What the storage holds of the posted messages, and whether the list's records agree."""
    from repoze.catalog.query import Eq

    from kittypyr.bootstrap import ROOT_KEY
    from kittypyr.catalog import search

    connection = db.open()
    try:
        archive = connection.root()[ROOT_KEY]
        mailing_list = archive.lists[LIST]
        names = set(mailing_list.messages.keys())
        sent = {name for name, _ in posted}
        present = names & sent
        in_threads = sum(len(thread) for thread in mailing_list.threads.values())
        catalogued, _ = search(archive, Eq("kind", "message") & Eq("list", LIST))
        return {
            "present": len(present),
            "missing": len(stored_claims - names),
            "lost": len(sent - names),
            "duplicates": len(names) - base_count - len(present),
            "count": len(mailing_list.messages),
            "stored": len(names),
            "in_threads": in_threads,
            "catalogued": catalogued,
        }
    finally:
        connection.close()


def errors_logged(folder):
    """``(errors, tracebacks)``: the ERROR lines of the servers' logs in ``folder``, and the tracebacks among them."""
    errors = tracebacks = 0
    for log in folder.glob("server-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            errors += " ERROR [" in line
            tracebacks += line.startswith("Traceback (most recent call last)")
    return errors, tracebacks


def run(kind, fault, args, urls, base_count, later, data, postgresql):
    """One run of one set-up; returns True when nothing was lost, duplicated or failed."""
    label = kind + (f", fault: {fault}" if fault else "")
    folder = data / "runs" / f"{kind}-{fault or 'none'}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    count = 1 if kind == "filestorage" else args.processes
    zeo = None
    database = None
    if kind in ("filestorage", "zeo"):
        shutil.copytree(data / "base" / "var", folder / "var")
    cache = production_cache()
    if kind == "filestorage":
        uri_of = lambda port: f"file://{folder}/var/Data.fs?blobstorage_dir={folder}/var/blobs&{cache}"  # noqa: E731
    elif kind == "zeo":
        zeo = ZEOServer(folder)
        zeo.conf.write_text(zeo.conf.read_text().replace(f"{folder}/Data.fs", f"{folder}/var/Data.fs")
                            .replace(f"{folder}/blobs", f"{folder}/var/blobs"))
        zeo.start()
        uri_of = lambda port: (f"zeo://127.0.0.1:{zeo.port}?blob_dir={folder}/blob-cache-{port}"  # noqa: E731
                               f"&shared_blob_dir=false&{cache}")
    else:
        database = f"run_{fault or 'none'}".replace("-", "_")
        postgresql.drop_database(database)
        postgresql.copy_database("base", database)
        uri_of = lambda port: postgresql.uri(database, folder / f"blob-cache-{port}",  # noqa: E731
                                             cache_local_mb=100) + f"&{cache}"
    processes = []
    for number in range(count):
        port = free_port()
        config = folder / f"server-{number}.ini"
        config.write_text(CONFIG.format(uri=uri_of(port), port=port, key=KEY))
        processes.append(Process(config, port, folder / f"server-{number}.log"))
    started = time.monotonic()
    for process in processes:
        process.start()
    ports = [p.port for p in processes]
    warm_up(ports, urls)
    print(f"\n== {label}: {count} waitress process(es) of 4 threads, {args.readers} readers, "
          f"archiver at {args.write_rate:g} msg/s  (start-up and warm-up {time.monotonic() - started:.0f} s)",
          flush=True)

    figures = Figures()
    load_started = time.monotonic()
    deadline = load_started + args.duration
    readers = Readers(ports, urls, figures, deadline, args.max_requests, args.readers)
    archiver = Archiver(ports, later, args.write_rate, figures, deadline, args.max_attempts, args.senders)
    faults = []

    def inject():
        time.sleep(args.duration * 0.4)
        at = time.monotonic() - load_started
        if fault == "kill":
            victim = processes[-1]
            victim.kill()
            back = time.monotonic()
            victim.start()
            faults.append(f"SIGKILL of one app process at {at:.0f} s, listening again after "
                          f"{time.monotonic() - back:.1f} s")
        elif fault == "zeo-restart":
            zeo.stop()
            zeo.start()
            faults.append(f"ZEO server restarted at {at:.0f} s")
        elif fault == "pg-restart":
            postgresql.restart()
            faults.append(f"PostgreSQL restarted (fast shutdown) at {at:.0f} s")

    injector = threading.Thread(target=inject, daemon=True) if fault else None
    try:
        readers.start()
        archiver.start()
        if injector is not None:
            injector.start()
        readers.join()
        load_seconds = time.monotonic() - load_started
        archiver.join(timeout=max(0.0, deadline - time.monotonic()) + args.time_limit)
        if injector is not None:
            injector.join(timeout=300)
        rss = [process_memory_mb(p.popen.pid) for p in processes]
    finally:
        readers.stopped.set()
        for process in processes:
            process.stop()
        if zeo is not None:
            zeo.stop()

    if kind == "relstorage":
        import zodburi
        from ZODB import DB

        factory, options = zodburi.resolve_uri(postgresql.uri(database, folder / "blob-cache-check",
                                                              read_only="true"))
        db = DB(factory(), **options)
    else:
        from ZODB import DB
        from ZODB.FileStorage import FileStorage

        db = DB(FileStorage(str(folder / "var" / "Data.fs"), blob_dir=str(folder / "var" / "blobs"),
                            read_only=True))
    try:
        found = verify(db, later[:archiver.sent], base_count, figures.stored_claims)
    finally:
        db.close()

    retried_conflicts, conflict_failures = log_counts(folder)
    logged_errors, tracebacks = errors_logged(folder)
    # A ZEO server resolves conflicts itself, and logs its failures in its own log.
    zeo_log = folder / "zeo.log"
    if zeo_log.exists():
        conflict_failures += zeo_log.read_text(errors="replace").count("Unexpected error while trying to resolve")
    answered = sum(n for status, n in figures.statuses.items() if status == 200)
    for line in faults:
        print(f"   fault: {line}")
    print(f"   readers: {answered} pages answered 200 in {load_seconds:.0f} s = {answered / load_seconds:.1f} "
          f"pages/s   (statuses {dict(figures.statuses)})")
    print(f"   {'page':10} {'count':>6} {'p50 ms':>8} {'p99 ms':>8}")
    for page_kind in KINDS:
        times = figures.latencies[page_kind]
        if times:
            print(f"   {page_kind:10} {len(times):6} {statistics.median(times) * 1000:8.0f} "
                  f"{percentile(times, 0.99):8.0f}")
    print(f"   reader errors: {len(figures.errors)}  (must be 0)   503s retried: {figures.retried_503}   "
          f"refused connections sent to the next process: {figures.retried_refused}")
    for error in figures.errors[:5]:
        print(f"      {error}")
    stored = figures.posted[200]
    post_p50 = statistics.median(figures.post_latencies) * 1000 if figures.post_latencies else 0
    print(f"   archiver: {archiver.sent} messages sent, answered 200: {stored} "
          f"({stored / load_seconds:.1f} msg/s, p50 {post_p50:.0f} ms), 503s retried: {figures.post_503}, "
          f"other answers {dict((str(s), n) for s, n in figures.posted.items() if s not in (200, 503)) or 0}, "
          f"still queued at the end (never answered 200; Mailman keeps them): {len(figures.given_up)}")
    # Lost: neither stored nor still in Mailman's queue.
    lost = found["lost"] - len(set(figures.given_up) - figures.stored_claims)
    print(f"   after the run: present {found['present']} of {archiver.sent}   answered 200 but missing: "
          f"{found['missing']}  (must be 0)   lost: {lost}  (must be 0)   duplicates: {found['duplicates']}  "
          f"(must be 0)")
    agree = found["count"] == found["stored"] == found["in_threads"] == found["catalogued"]
    print(f"   list count {found['count']}, stored {found['stored']}, in threads {found['in_threads']}, "
          f"catalogued {found['catalogued']}: {'agree' if agree else 'DISAGREE'}")
    print(f"   requests retried after a conflict (servers' logs): {retried_conflicts}   conflict resolution "
          f"errors: {conflict_failures}   process RSS at the end: {', '.join(f'{r:.0f}' for r in rss)} MB",
          flush=True)
    print(f"   ERROR lines in the servers' logs: {logged_errors}, with a traceback: {tracebacks}  (a run without "
          f"a fault should have none)", flush=True)
    if kind == "relstorage":
        postgresql.drop_database(database)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return not figures.errors and found["missing"] == 0 and found["duplicates"] == 0 and lost == 0 and agree


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="an mbox (.gz), Maildir or Pipermail file of real mail")
    parser.add_argument("--data", default="/tmp/kittypyr-load", help="folder for the archives (kept, reused)")
    parser.add_argument("--setups", default="filestorage,zeo,relstorage")
    parser.add_argument("--faults", action="store_true", help="also the runs with a fault")
    parser.add_argument("--only-faults", action="store_true", help="only the runs with a fault")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--duration", type=float, default=90, help="seconds of load per run")
    parser.add_argument("--max-requests", type=int, default=200000, help="reader requests per run at most")
    parser.add_argument("--write-rate", type=float, default=20, help="messages a second to the archiver")
    parser.add_argument("--senders", type=int, default=16,
                        help="archiver clients sending at once (enough to keep the rate when answers are slow)")
    parser.add_argument("--held-back", type=int, default=2500, help="messages kept out of the import")
    parser.add_argument("--max-attempts", type=int, default=30, help="sends of one message at most")
    parser.add_argument("--time-limit", type=float, default=300, help="seconds after the load to finish sending")
    parser.add_argument("--keep", action="store_true", help="keep each run's storage and logs")
    args = parser.parse_args()
    data = Path(args.data)
    kinds = [k for k in args.setups.split(",") if k]
    if args.held_back < args.write_rate * args.duration:
        parser.error("--held-back must cover --write-rate × --duration")
    urls, base_count, later = prepare(data, args.corpus, args.held_back, "relstorage" in kinds)
    print(f"archive: {base_count} messages; {len(later)} held back for the archiver; machine load "
          f"{os.getloadavg()[0]:.1f} (2 cores, shared: figures are noisy)", flush=True)
    plan = [] if args.only_faults else [(kind, None) for kind in kinds]
    if args.faults or args.only_faults:
        plan += [(kind, fault) for kind, fault in (("zeo", "kill"), ("zeo", "zeo-restart"),
                                                   ("relstorage", "kill"), ("relstorage", "pg-restart"))
                 if kind in kinds]
    ok = True
    postgresql = PostgreSQLServer(data / "postgresql") if "relstorage" in kinds else None
    if postgresql is not None:
        postgresql.__enter__()
    try:
        for kind, fault in plan:
            ok = run(kind, fault, args, urls, base_count, later, data, postgresql) and ok
    finally:
        if postgresql is not None:
            postgresql.__exit__(None, None, None)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
