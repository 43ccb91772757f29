"""Page latency over HTTP on a real archive, served by waitress.

    .venv/bin/python bench/pages.py [--data DIR] [--corpus PATH] [--requests N]

Imports the corpus into DIR (skipped when DIR already holds an archive),
serves it with ``pserve`` on a free loopback port, and prints p50 / p95
latency for the lists index, the list overview, the busiest month, the
largest thread and a message page, then the server's RSS.
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

from common import served_archive  # noqa: E402

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
    parser.add_argument("--pick", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pick:
        print(json.dumps(pick_urls(args.pick)))
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
