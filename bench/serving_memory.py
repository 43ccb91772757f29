"""A serving process's memory as readers go through an archive, on FileStorage and on ZEO.

    .venv/bin/python bench/serving_memory.py DIR... [--pages 300] [--engines file zeo] [--cache SETTINGS]
        [--placeholders-max N]

Each DIR is an archive folder (``kittypyr.ini`` and ``var/``), such as the
1× and 10× archives ``bench/search.py --scale 10 --data DIR`` leaves. For
each archive and engine, starts one ``pserve`` with production.ini's
cache settings (and ``kittypyr.connection_placeholders_max`` N, the
default unless given) and asks it, in stages, for every month page (up to
PAGES / 10), PAGES threads, PAGES messages and PAGES / 5 searches of the
list with the most messages, each page once, as readers spread over an
archive would; after each stage it prints the process's
RSS. On ZEO the storage's index of records lives in the ZEO server, not
in the process serving pages. Readers only read, but the archive is opened
as a server opens it.
"""

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import add_placeholders_option, placeholders_line, process_memory_mb, production_cache  # noqa: E402
from tests.functional import VENV_BIN, free_port, wait_for_port, write_config  # noqa: E402

WORDS = ("cache kernel patch tlb octeon interrupt binutils memory driver mips linux build error config module "
         "boot irq compile fails release").split()
STAGES = ("started", "months", "threads", "messages", "searches")


def pick_pages(var, count):
    """{stage: [path]} of the archive's longest list, and the number of messages it holds."""
    from ZODB import DB
    from ZODB.FileStorage import FileStorage

    from kittypyr.bootstrap import ROOT_KEY

    db = DB(FileStorage(str(var / "Data.fs"), blob_dir=str(var / "blobs"), read_only=True))
    try:
        lists = db.open().root()[ROOT_KEY].lists
        address, mailing_list = max(lists.items(), key=lambda item: len(item[1].messages))
        chance = random.Random(5)
        base = f"/list/{address}/"
        months = [f"{base}{month[:4]}/{int(month[5:7])}/" for month in mailing_list.activity.per_month]
        threads, messages = list(mailing_list.threads.keys()), list(mailing_list.messages.keys())
        searches = ["/search?" + urllib.parse.urlencode({"q": " ".join(chance.sample(WORDS, chance.choice((1, 2)))),
                                                         "mlist": address}) for _ in range(count // 5)]
        pages = {
            "months": chance.sample(months, min(len(months), count // 10)),
            "threads": [f"{base}thread/{key}/" for key in chance.sample(threads, min(len(threads), count))],
            "messages": [f"{base}message/{key}/" for key in chance.sample(messages, min(len(messages), count))],
            "searches": searches,
        }
        return pages, len(messages)
    finally:
        db.close()


def start_zeo(var, scratch, cache):
    port = free_port()
    conf = scratch / "zeo.conf"
    conf.write_text(f"<zeo>\n  address 127.0.0.1:{port}\n</zeo>\n"
                    f"<filestorage 1>\n  path {var}/Data.fs\n  blob-dir {var}/blobs\n</filestorage>\n")
    log = open(scratch / "zeo.log", "wb")
    server = subprocess.Popen([str(VENV_BIN / "runzeo"), "-C", str(conf)], stdout=log, stderr=log)
    wait_for_port(port, timeout=600, process=server)
    return server, f"zeo://127.0.0.1:{port}?storage=1&blob_dir={scratch}/blob-cache&shared_blob_dir=false&{cache}"


def measure(var, engine, pages, cache, placeholders_max=None):
    """{stage: RSS MB} of one pserve on ``var`` through ``engine``, page by page."""
    scratch = Path(tempfile.mkdtemp(prefix="kittypyr-memory-"))
    zeo = None
    try:
        if engine == "zeo":
            zeo, uri = start_zeo(var, scratch, cache)
        else:
            uri = f"file://{var}/Data.fs?blobstorage_dir={var}/blobs&{cache}"
        port = free_port()
        config = write_config(scratch, uri=uri, port=port, extra=placeholders_line(placeholders_max))
        log = open(scratch / "server.log", "wb")
        server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=log, stderr=log)
        try:
            wait_for_port(port, timeout=600, process=server)
            figures = {"started": process_memory_mb(server.pid)}
            for stage in STAGES[1:]:
                for path in pages[stage]:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=300) as response:
                        response.read()
                figures[stage] = process_memory_mb(server.pid)
            return figures
        finally:
            server.terminate()
            server.wait(timeout=60)
            log.close()
    finally:
        if zeo is not None:
            zeo.terminate()
            zeo.wait(timeout=60)
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archives", nargs="+", type=Path)
    parser.add_argument("--pages", type=int, default=300, help="threads and messages asked for")
    parser.add_argument("--engines", nargs="+", choices=("file", "zeo"), default=["file", "zeo"])
    parser.add_argument("--cache", default=production_cache(),
                        help="the cache settings added to zodbconn.uri (production.ini's by default)")
    add_placeholders_option(parser)
    args = parser.parse_args()
    print(f"RSS MB of one serving process after each stage ({args.pages} threads, {args.pages} messages, "
          f"{args.pages // 10} months at most, {args.pages // 5} searches)")
    print(f"{'archive':28} {'messages':>9} {'engine':>6} " + " ".join(f"{stage:>9}" for stage in STAGES))
    results = {}
    for folder in args.archives:
        var = folder.resolve() / "var"
        pages, messages = pick_pages(var, args.pages)
        for engine in args.engines:
            started = time.monotonic()
            figures = measure(var, engine, pages, args.cache, args.placeholders_max)
            results[(str(folder), engine)] = figures
            print(f"{str(folder)[-28:]:28} {messages:9} {engine:>6} "
                  + " ".join(f"{figures[stage]:9.0f}" for stage in STAGES)
                  + f"   ({time.monotonic() - started:.0f} s)", flush=True)
    if len(args.archives) > 1:
        first, last = str(args.archives[0]), str(args.archives[-1])
        for engine in args.engines:
            ratio = results[(last, engine)]["searches"] / results[(first, engine)]["searches"]
            print(f"{engine}: last archive / first, after every stage: {ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
