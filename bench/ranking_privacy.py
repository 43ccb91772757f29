"""What ranking without the lists a reader may not see costs a search.

    .venv/bin/python bench/ranking_privacy.py DIR [--runs 5]

DIR is an archive folder (``kittypyr.ini`` and ``var/``), such as the one
``bench/search.py --data DIR`` leaves. It is copied to a scratch folder,
a private list of three messages holding some of the queries' words is
added to the copy, and each query is run in-process (``run_search``, as
the search page runs it) by a reader who sees every list, whose scores
count every message, and by an anonymous reader, whose scores leave out
the private list's (``kittypyr.fulltext.ranked_without``). Prints the p50
in ms of ``--runs`` runs of each query for both, after one warm-up run.
The anonymous reader's figure also holds the filter that keeps results to
the lists it may see, which searches had before ranking left anything out.
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import transaction  # noqa: E402
from pyramid.paster import bootstrap  # noqa: E402

from kittypyr.archiving import archive_message, ensure_mailing_list  # noqa: E402
from kittypyr.search import run_search  # noqa: E402
from tests.mailbuilder import make_message  # noqa: E402

PRIVATE = "board@lists.example.org"
QUERIES = ("cache", "kernel patch", "tlb", "octeon", "interrupt", "binutils", "smp OR tlb", "octeon OR binutils",
           "watchdog", "ptrace")


def add_private_list(root):
    private = ensure_mailing_list(root, PRIVATE)
    private.archive_policy = "private"
    for n in range(3):
        archive_message(private, make_message(
            message_id=f"<ranking-privacy-{n}@example.org>", subject="cache tlb", sender=("S", "s@example.org"),
            date=datetime(2022, 2, 1 + n, tzinfo=timezone.utc), body="kernel cache interrupt octeon\n"))
    transaction.commit()


def p50_ms(root, query, visible, runs):
    run_search(root, query, visible)  # warm: its records loaded once
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run_search(root, query, visible)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="an archive folder: kittypyr.ini and var/")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    source = Path(args.data)
    with tempfile.TemporaryDirectory(prefix="kittypyr-ranking-") as scratch:
        shutil.copytree(source / "var", Path(scratch) / "var")
        config = Path(scratch) / "kittypyr.ini"
        config.write_text((source / "kittypyr.ini").read_text().replace(str(source / "var"), f"{scratch}/var"))
        env = bootstrap(str(config))
        try:
            root = env["root"]
            add_private_list(root)
            everything = list(root.lists.keys())
            public = [address for address in everything if address != PRIVATE]
            print(f"{'query':22} {'sees all':>9} {'anonymous':>10}  (p50 ms of {args.runs})")
            for query in QUERIES:
                print(f"{query:22} {p50_ms(root, query, everything, args.runs):9.1f} "
                      f"{p50_ms(root, query, public, args.runs):10.1f}")
        finally:
            env["closer"]()
            for database in getattr(env["registry"], "_zodb_databases", {}).values():
                database.close()


if __name__ == "__main__":
    main()
