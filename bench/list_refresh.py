"""What the Mailman list refresh costs a page that may show any list, on a site of many lists.

    .venv/bin/python bench/list_refresh.py [--lists N] [--pages N]

Makes a site of N lists, all synced with Mailman now (Mailman configured,
taken to answer, never asked: nothing is stale), and serves N pages of
``/search-help`` (a page that reads no list itself) in this process, two
ways in turn: walking over the lists at every page (what the refresh did
before each process remembered when the first list becomes stale) and as
it is now. Prints, per page: the lists whose records are loaded with
cold caches, and the median wall-clock and process CPU time with warm ones.
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import transaction  # noqa: E402
from pyramid.scripting import prepare  # noqa: E402
from webtest import TestApp  # noqa: E402

from kittypyr import main, standalone  # noqa: E402
from kittypyr.archiving import ensure_mailing_list  # noqa: E402
from kittypyr.mailman import apply_list_details, list_refresher  # noqa: E402
from tests.functional import free_port  # noqa: E402

PAGE = "/search-help"


def lists_loaded(database):
    return sum(1 for entry in database.cacheExtremeDetail()
               if entry["klass"].endswith(".MailingList") and entry["state"] is not None)


def measure(browser, database, pages, walk_every_page):
    loaded, wall, cpu = [], [], []
    for n in range(pages):
        if walk_every_page:
            list_refresher.next_stale.clear()
        cold = n % 2 == 0
        if cold:
            database.cacheMinimize()
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        browser.get(PAGE)
        if cold:
            loaded.append(lists_loaded(database))
        else:
            wall.append(time.perf_counter() - wall_start)
            cpu.append(time.process_time() - cpu_start)
    return statistics.median(loaded), statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def main_bench():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lists", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kittypyr-bench-refresh-"))
    (folder / "blobs").mkdir()
    standalone.presence.available = lambda registry: True
    app = main({}, **{"zodbconn.uri": f"file://{folder}/Data.fs?blobstorage_dir={folder}/blobs",
                      "kittypyr.base_url": "http://localhost/",
                      "kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}",
                      "kittypyr.mailman_sync_ttl": "300"})
    database = app.registry._zodb_databases[""]
    with prepare(registry=app.registry) as env:
        for n in range(args.lists):
            address = f"list{n}@lists.example.org"
            apply_list_details(ensure_mailing_list(env["root"], address),
                               {"display_name": address, "description": "", "archive_policy": "public"})
        transaction.commit()
    browser = TestApp(app)
    browser.get(PAGE)
    print(f"{args.lists} lists, {args.pages} pages of {PAGE} each way (half with cold caches)")
    print(f"{'':<22}{'lists loaded/page':>18}{'p50 ms':>9}{'CPU ms':>9}")
    for label, walk in (("walk at every page", True), ("remembered", False)):
        loaded, wall, cpu = measure(browser, database, args.pages, walk)
        print(f"{label:<22}{loaded:>18.0f}{wall:>9.2f}{cpu:>9.2f}")
    database.close()
    shutil.rmtree(folder)


if __name__ == "__main__":
    main_bench()
