"""Page latency over HTTP on a real archive, served by waitress.

    .venv/bin/python bench/pages.py [--data DIR] [--corpus PATH] [--requests N]
    .venv/bin/python bench/pages.py --existing DIR [DIR ...] [--requests N]

Imports the corpus into DIR (skipped when DIR already holds an archive),
serves it with ``pserve`` on a free loopback port, and prints p50 / p95
latency for the lists index, the list overview, the busiest month, the
largest thread and a message page, then the server's RSS.

``--existing`` imports nothing: it serves each folder as it is (an archive
in DIR/var, as ``--data`` and bench/search.py leave them, upgraded at
start-up if it is older), times the same kinds of page in each (the list
overview, its threads by activity and by popularity, its API thread list,
the busiest month and its year, the largest thread and its first
message, the list's feeds of messages and of threads, the largest thread's
feed, the profile of the list's top poster), and prints side by side their p50, the server's CPU time per
request and the records each loads from the storage with an emptied cache
(a figure the machine's load does not change), with the ratios of the last
folder to the first; then the time each archive took to open
(an upgrade included) and each server's RSS once started and after the run.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

sys.path.insert(0, str(HERE))

from common import served_archive, serving_config  # noqa: E402

LIST = "bench@lists.example.org"


def pick_urls(config):
    """The URLs to measure, chosen from the archive before the server opens it."""
    from pyramid.paster import bootstrap

    with bootstrap(str(config)) as env:
        archive = env["root"]
        request = env["request"]
        mailing_list = archive.lists[LIST]
        largest = max(mailing_list.threads.values(), key=len)
        activity = mailing_list.activity
        busiest_month = max(activity.per_month.items(), key=lambda item: item[1])[0]
        year, month = busiest_month.split("-")
        message = mailing_list.messages[largest.starter]
        path = lambda resource: request.resource_path(resource)  # noqa: E731
        return {
            "index": "/",
            "list overview": path(mailing_list),
            f"month {busiest_month} ({activity.per_month[busiest_month]} messages)":
                path(mailing_list[year][str(int(month))]),
            f"largest thread ({len(largest)} messages)": path(largest),
            "message": path(message),
        }


def pick_pages(config):
    """``(seconds the archive took to open, {kind: path})``: the pages ``--existing`` times, named alike
    in every archive. Opening includes the upgrade of an older archive."""
    from pyramid.paster import bootstrap

    started = time.perf_counter()
    with bootstrap(str(config)) as env:
        opening = time.perf_counter() - started
        request = env["request"]
        mailing_list = env["root"].lists[LIST]
        activity = mailing_list.activity
        busiest_month = max(activity.per_month.items(), key=lambda item: item[1])[0]
        year, month = busiest_month.split("-")
        largest = max(mailing_list.threads.values(), key=lambda thread: (len(thread), thread.__name__))
        path = lambda *parts: request.resource_path(*parts)  # noqa: E731
        month_page = path(mailing_list[year][str(int(month))])
        top_poster = activity.top_senders_ever(1)[0][0]
        return opening, {
            "index": "/",
            "list overview": path(mailing_list),
            "threads by activity": path(mailing_list, "threads"),
            "threads by popularity": path(mailing_list, "threads") + "?sort=popularity",
            "year": path(mailing_list[year]),
            "busiest month": month_page,
            "busiest month by start": month_page + "?sort=start",
            "busiest month, page 2": month_page + "?page=2",
            "API: the list's threads": f"/api/list/{LIST}/threads/",
            "largest thread": path(largest),
            "its first message": path(mailing_list.messages[largest.starter]),
            "the list's feed": path(mailing_list, "feed", ""),
            "its feed of threads": path(mailing_list, "feed", "threads"),
            "the largest thread's feed": path(largest, "t.atom"),
            "its top poster's profile": f"/users/{env['root'].people.person_id(top_poster)}/",
        }


def count_loads(config, pages):
    """{kind: records loaded}: what each page reads from the storage, rendered with an emptied cache.

    A figure that the machine's load does not change: a page whose cost
    grows with the list loads more records.
    """
    from pyramid.paster import get_app
    from pyramid.request import Request

    app = get_app(str(config))
    db = app.registry._zodb_databases[""]
    # Its monitor would take each connection's counts as the connection closes.
    db.setActivityMonitor(None)

    def loads():
        return sum(connection.getTransferCounts(True)[0] for connection in list(db.pool.all))

    loaded = {}
    for kind, url in pages.items():
        Request.blank(url).get_response(app)  # templates compiled, the connection made
        db.cacheMinimize()
        loads()
        response = Request.blank(url).get_response(app)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status}")
        loaded[kind] = loads()
    db.close()
    return loaded


def cpu_ms(pid):
    """CPU time (user and system) the process ``pid`` has used, in ms."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def timed(port, url, count, pid):
    """``(p50 ms, server CPU ms per request)`` of ``count`` requests of ``url``, after two that warm it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def fetch():
        connection.request("GET", url)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")

    fetch()
    fetch()
    timings = []
    before = cpu_ms(pid)
    for _ in range(count):
        started = time.perf_counter()
        fetch()
        timings.append((time.perf_counter() - started) * 1000)
    cpu = (cpu_ms(pid) - before) / count
    connection.close()
    return statistics.median(timings), cpu


def time_existing(folders, requests):
    """Serve each folder in turn; print the p50 and CPU per request of each page side by side."""
    from tests.functional import VENV_BIN, free_port, wait_for_port

    columns = []
    for folder in folders:
        folder = Path(folder)
        if not (folder / "var" / "Data.fs").exists():
            raise SystemExit(f"{folder} holds no archive (var/Data.fs)")
        port = free_port()
        config = serving_config(folder, port=port)
        opening, pages = json.loads(subprocess.run([sys.executable, __file__, "--pick-existing", str(config)],
                                                   check=True, capture_output=True, text=True).stdout)
        loaded = json.loads(subprocess.run([sys.executable, __file__, "--count-loads", str(config), json.dumps(pages)],
                                           check=True, capture_output=True, text=True).stdout)
        server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_port(port, timeout=600, process=server)
            started_rss = rss_mb(server.pid)
            figures = {}
            for kind, url in pages.items():
                figures[kind] = (*timed(port, url, requests, server.pid), loaded[kind])
            columns.append((folder.name, figures, opening, started_rss, rss_mb(server.pid)))
        finally:
            server.terminate()
            server.wait(timeout=60)
    first, last = columns[0][1], columns[-1][1]
    names = [name for name, *_ in columns]
    print(f"machine load {os.getloadavg()[0]:.1f}; p50 ms over HTTP, the server's CPU ms per request, "
          "records loaded by the page with an emptied cache")
    print(f"{'page':28}" + "".join(f" {'p50 ' + n:>10}" for n in names) + "".join(f" {'cpu ' + n:>10}" for n in names)
          + "".join(f" {'loads ' + n:>10}" for n in names) + f" {'p50 ×':>6} {'cpu ×':>6} {'loads ×':>7}")
    for kind in first:
        row = [figures[kind] for _, figures, *_ in columns]
        print(f"{kind:28}" + "".join(f" {p50:10.1f}" for p50, _, _ in row) + "".join(f" {cpu:10.1f}" for _, cpu, _ in row)
              + "".join(f" {loads:10d}" for _, _, loads in row)
              + f" {last[kind][0] / first[kind][0]:6.2f} {last[kind][1] / max(first[kind][1], 0.1):6.2f}"
              f" {last[kind][2] / max(first[kind][2], 1):7.2f}")
    for name, _, opening, started_rss, rss in columns:
        print(f"{name}: opened (and upgraded, if older) in {opening:.1f} s; server RSS {started_rss:.0f} MB started, "
              f"{rss:.0f} MB after the run")
    print(f"machine load at the end {os.getloadavg()[0]:.1f}")


def measure(port, url, count):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    timings = []
    for _ in range(count + 2):
        started = time.perf_counter()
        connection.request("GET", url)
        response = connection.getresponse()
        response.read()
        timings.append((time.perf_counter() - started) * 1000)
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
    connection.close()
    cold = timings[0]
    timings = sorted(timings[2:])  # the first two warm the caches
    return cold, statistics.median(timings), timings[int(len(timings) * 0.95) - 1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder for the archive (kept; reused when present)")
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/linux-mips-2005-2012.mbox.gz"))
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--existing", nargs="+", metavar="DIR",
                        help="time the pages of these archives as they are, side by side")
    parser.add_argument("--pick", help=argparse.SUPPRESS)
    parser.add_argument("--pick-existing", help=argparse.SUPPRESS)
    parser.add_argument("--count-loads", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count_loads:
        print(json.dumps(count_loads(args.count_loads[0], json.loads(args.count_loads[1]))))
        return
    if args.pick:
        print(json.dumps(pick_urls(args.pick)))
        return
    if args.pick_existing:
        print(json.dumps(pick_pages(args.pick_existing)))
        return
    if args.existing:
        time_existing(args.existing, args.requests)
        return

    def choose_urls(config):
        # In a child process: the storage is locked while a process has it open.
        return json.loads(subprocess.run([sys.executable, __file__, "--pick", str(config)], check=True,
                                         capture_output=True, text=True).stdout)

    with served_archive(args.data, args.corpus, LIST, "kittypyr-pages-", choose_urls) as (_, port, server, urls):
        print(f"{'page':45} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
        for name, url in urls.items():
            cold, p50, p95 = measure(port, url, args.requests)
            print(f"{name:45} {cold:9.1f} {p50:8.1f} {p95:8.1f}")
        print(f"server RSS after the run: {rss_mb(server.pid):.0f} MB")

if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
