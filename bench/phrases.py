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


class LoadCounter:
    """Records loaded from the storage by every connection of this process, counted."""

    def __init__(self):
        import ZODB.Connection

        self.loads = 0
        original = ZODB.Connection.Connection.setstate

        def counting(connection, obj):
            self.loads += 1
            return original(connection, obj)

        ZODB.Connection.Connection.setstate = counting


@contextmanager
def fresh_browser(folder):
    """A WebTest browser of a new application on ``folder``'s archive, closed after (the storage is locked)."""
    from pyramid.paster import get_app
    from webtest import TestApp

    app = get_app(str(serving_config(folder)))
    try:
        yield TestApp(app)
    finally:
        for database in app.registry._zodb_databases.values():
            database.close()


def search_url(query, address):
    return "/search?" + urllib.parse.urlencode({"q": query, "mlist": address})


def timed(browser, url, counter):
    before = counter.loads
    started = time.perf_counter()
    browser.get(url)
    return (time.perf_counter() - started) * 1000, counter.loads - before


def cold(folder, address, counter):
    with fresh_browser(folder) as browser:
        browser.get(search_url("kernel", address))
        figures = [timed(browser, search_url(f'"{phrase}"', address), counter) for phrase in PHRASES]
    times = [ms for ms, _ in figures]
    return statistics.median(times), statistics.mean(times), max(times), statistics.mean(n for _, n in figures)


def repeated(folder, address, requests, counter):
    figures = {}
    with fresh_browser(folder) as browser:
        for phrase in REPEATED:
            url = search_url(f'"{phrase}"', address)
            browser.get(url)
            runs = [timed(browser, url, counter) for _ in range(requests)]
            figures[phrase] = (statistics.median(ms for ms, _ in runs), runs[-1][1])
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--list", default=LIST, help="the list searched")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    counter = LoadCounter()
    print(f"{'folder':40} {'round':>5}  cold p50  mean   most  loads   "
          + "  ".join(f'"{phrase}" p50 (loads)' for phrase in REPEATED), flush=True)
    for round_ in range(1, args.rounds + 1):
        for folder in args.folders:
            p50, mean, most, loads = cold(folder, args.list, counter)
            again = repeated(folder, args.list, args.requests, counter)
            print(f"{str(folder)[-40:]:40} {round_:5} {p50:9.1f} {mean:5.1f} {most:6.1f} {loads:6.0f}   "
                  + "  ".join(f"{ms:6.1f} ({n})".rjust(len(phrase) + 14) for phrase, (ms, n) in again.items()),
                  flush=True)
    print("ms a search in-process; loads: records read from the storage by a cold phrase (mean), "
          "and by the last of the repeated requests", flush=True)


if __name__ == "__main__":
    main()
