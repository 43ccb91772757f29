"""Phrase searches as readers ask them, on archives of different sizes.

    .venv/bin/python bench/phrases.py DIR [DIR ...] [--list ADDRESS] [--requests 30] [--rounds 2]

Each DIR is an archive folder as bench/search.py leaves them (the 1x and
10x of ``bench/search.py --scale 10 --data DIR``); the list searched is
bench/pages.py's unless ``--list`` names another. The archive is served
in this process through WebTest with production.ini's cache settings:
only the search is timed, not HTTP. For each folder, each round:

- cold: a fresh application (an empty connection cache), one other search
  to warm what every search needs, then each of PHRASES asked once, as
  readers ask phrases, each new to the process: p50, mean and most ms,
  and the records loaded a phrase;
- repeated: each of REPEATED asked ``--requests`` times after one
  warm-up: p50 ms, and the records loaded by the last request (none when
  what it needs stays in the cache).

The archive is opened as a server opens it (and upgraded if its schema is
older), never written otherwise.
"""

import argparse
import statistics
import sys
import time
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import serving_config  # noqa: E402
from pages import LIST  # noqa: E402

# Phrases of the linux-mips corpus's words, common and less so.
PHRASES = ["cache flush", "mips kernel", "patch for", "the kernel", "this patch", "linux mips", "signed off",
           "bug fix", "tlb flush", "page table", "memory barrier", "board support", "device tree",
           "build error", "compile error", "interrupt handler", "system call", "kernel panic",
           "linux kernel", "kernel patch"]
# Asked again and again: one a page of its words' best holds, one that few of them hold.
REPEATED = ["cache flush", "linux kernel", "patch kernel"]


@contextmanager
def fresh_browser(folder):
    """``(browser, loads)``: WebTest on a new application of ``folder``'s archive (an empty cache), closed after.

    ``loads()``: the records its connections loaded from the storage since
    it was last asked (as bench/pages.py counts them).
    """
    from pyramid.paster import get_app
    from webtest import TestApp

    app = get_app(str(serving_config(folder)))
    database = app.registry._zodb_databases[""]
    # Its monitor would take each connection's counts as the connection closes.
    database.setActivityMonitor(None)

    def loads():
        return sum(connection.getTransferCounts(True)[0] for connection in list(database.pool.all))

    try:
        yield TestApp(app), loads
    finally:
        database.close()


def search_url(query, address):
    return "/search?" + urllib.parse.urlencode({"q": query, "mlist": address})


def timed(browser, url, loads):
    loads()
    started = time.perf_counter()
    browser.get(url)
    return (time.perf_counter() - started) * 1000, loads()


def cold(folder, address):
    with fresh_browser(folder) as (browser, loads):
        browser.get(search_url("kernel", address))
        figures = [timed(browser, search_url(f'"{phrase}"', address), loads) for phrase in PHRASES]
    times = [ms for ms, _ in figures]
    return statistics.median(times), statistics.mean(times), max(times), statistics.mean(n for _, n in figures)


def repeated(folder, address, requests, queries):
    """Query -> (p50 ms, records loaded by the last request): each of ``queries`` asked ``requests`` times after one."""
    figures = {}
    with fresh_browser(folder) as (browser, loads):
        for query in queries:
            url = search_url(query, address)
            browser.get(url)
            runs = [timed(browser, url, loads) for _ in range(requests)]
            figures[query] = (statistics.median(ms for ms, _ in runs), runs[-1][1])
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--list", default=LIST, help="the list searched")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"{'folder':40} {'round':>5}  cold p50  mean   most  loads   "
          + "  ".join(f'"{phrase}" p50 (loads)' for phrase in REPEATED), flush=True)
    for round_ in range(1, args.rounds + 1):
        for folder in args.folders:
            p50, mean, most, loads = cold(folder, args.list)
            again = repeated(folder, args.list, args.requests, [f'"{phrase}"' for phrase in REPEATED])
            print(f"{str(folder)[-40:]:40} {round_:5} {p50:9.1f} {mean:5.1f} {most:6.1f} {loads:6.0f}   "
                  + "  ".join(f"{ms:6.1f} ({n})".rjust(len(phrase) + 12) for phrase, (ms, n) in again.items()),
                  flush=True)
    print("ms a search in-process; loads: records read from the storage by a cold phrase (mean), "
          "and by the last of the repeated requests", flush=True)


if __name__ == "__main__":
    main()
