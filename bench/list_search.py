"""A search in one list: the list alone in an archive, against the same list among others.

    .venv/bin/python bench/list_search.py DIR[:ADDRESS] [DIR[:ADDRESS] ...] [--requests 30] [--rounds 2] [--query Q ...]

Each DIR is an archive folder as bench/scale.py leaves them: the first
list of ``bench/scale.py --layout lists`` (ten lists), and the same mail
imported again into an archive of its own (its ``again`` folder). The
list searched is ADDRESS, bench/scale.py's list unless named. Served in
this process through WebTest with production.ini's cache settings, only
the search timed, not HTTP. For each folder, each round:

- cold: a fresh application (an empty connection cache), one search to
  warm what every search needs, then each of QUERIES asked once: the
  records each loads;
- repeated: each of QUERIES asked ``--requests`` times after one
  warm-up: p50 ms, and the records loaded by the last request.

The archive is opened as a server opens it (and upgraded if its schema is
older), never written otherwise.
"""

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from phrases import fresh_browser, repeated, search_url, timed  # noqa: E402
from scale import LIST  # noqa: E402

# Words of the linux-mips corpus, alone, together, in a phrase, with a sender.
QUERIES = ["kernel", "linux kernel", "kernel patch", "mips kernel", "linux patch", '"cache flush"',
           "from:ralf kernel"]


def archive_and_list(text):
    folder, _, address = text.partition(":")
    return Path(folder), address or LIST


def cold_loads(folder, address, queries=QUERIES):
    with fresh_browser(folder) as (browser, loads):
        browser.get(search_url("mips", address))
        return {query: timed(browser, search_url(query, address), loads)[1] for query in queries}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", nargs="+", type=archive_and_list, metavar="DIR[:ADDRESS]")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--query", action="append", dest="queries", metavar="QUERY",
                        help="a query to time instead of the usual ones (repeat for more)")
    args = parser.parse_args()
    queries = args.queries or QUERIES
    print(f"{'archive':32} {'round':>5}  " + "  ".join(f"{query:>18}" for query in queries), flush=True)
    for round_ in range(1, args.rounds + 1):
        for folder, address in args.archives:
            loads = cold_loads(folder, address, queries)
            again = repeated(folder, address, args.requests, queries)
            print(f"{str(folder)[-32:]:32} {round_:5}  "
                  + "  ".join(f"{again[query][0]:7.1f} ({again[query][1]:3d}) c{loads[query]:4d}" for query in queries),
                  flush=True)
    print("each query: p50 ms of the repeated requests in-process (records loaded by the last of them) "
          "and the records loaded when asked cold (c)", flush=True)


if __name__ == "__main__":
    main()
