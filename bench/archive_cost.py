"""What one message archived through Mailman's archiver API costs, on archives of different sizes.

    .venv/bin/python bench/archive_cost.py DIR [DIR ...] [--messages 200] [--corpus PATH] [--cache SETTINGS]
        [--placeholders-max N] [--archiver-placeholders-max N] [--list ADDRESS] [--pages-between K]

Each DIR is an archive folder as bench/search.py, bench/pages.py and
bench/scale.py leave them (DIR/var/Data.fs); its list is bench/pages.py's
unless ``--list`` names another (bench/scale.py's is scale@lists.example.org).
The archive is changed: the messages are added to it, so give copies. The
application is made from the folder's storage with an archiver key, and
``--messages`` messages of the corpus, each under a Message-ID of its own
(new to every archive), are posted one at a time to
``/api/mailman/archive`` through WebTest, as Mailman's plugin posts them:
one request and one transaction a message, without HTTP, so that only the
archive's own work is timed. With ``--pages-between K``, K pages
(months, threads, messages and searches from all over the longest list, as
bench/serving_memory.py picks them) are fetched between two messages, as
readers would, and only the messages are timed. Printed for each folder: the list's messages
before, CPU time and wall time a message (p50, mean), the records and
bytes each message's transaction wrote, and the placeholders its
connections kept at the end, the most of any and the fewest
(``kittypyr.connection_placeholders_max`` bounds the pages' connections,
``kittypyr.archiver_placeholders_max`` the archiver's);
then the ratios of the last folder to the first. An archived message
should cost about the same whatever the size of the archive.
"""

import argparse
import gzip
import itertools
import random
import re
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    ARCHIVER_PLACEHOLDERS_SETTING,
    add_placeholders_option,
    placeholders_line,
    production_cache,
    serving_config,
)
from kittypyr.placeholders import placeholders_in  # noqa: E402
from pages import LIST  # noqa: E402
from serving_memory import pick_pages  # noqa: E402

KEY = "bench-archiver-key"
MESSAGE_ID = re.compile(rb"^(message-id|in-reply-to|references):", re.IGNORECASE)


def corpus_messages(path, count, tag):
    """The first ``count`` messages of the mbox at ``path``, their ids made new with ``tag``."""
    opener = gzip.open if str(path).endswith(".gz") else open
    messages, lines = [], []
    with opener(path, "rb") as source:
        for line in source:
            if line.startswith(b"From ") and lines:
                messages.append(b"".join(lines))
                lines = []
                if len(messages) == count:
                    break
                continue
            if line.startswith(b"From "):
                continue
            if MESSAGE_ID.match(line) or (lines and line[:1] in (b" ", b"\t") and _in_id_header(lines)):
                line = re.sub(rb"<(?=[^<>\s]+>)", b"<" + tag + b".", line)
            lines.append(line)
    if lines and len(messages) < count:
        messages.append(b"".join(lines))
    return messages


def _in_id_header(lines):
    for previous in reversed(lines):
        if previous[:1] not in (b" ", b"\t"):
            return bool(MESSAGE_ID.match(previous))
    return False


def storage_transactions(storage, after):
    """``(records, bytes)`` of each transaction committed after the ``after`` tid."""
    written = []
    for transaction_record in storage.iterator(start=after):
        if transaction_record.tid == after:
            continue
        records = [record for record in transaction_record]
        written.append((len(records), sum(len(record.data or b"") for record in records)))
    return written


def pages_to_read(folder, count):
    """``count`` paths from all over the archive's longest list, its kinds of page shuffled together."""
    if not count:
        return []
    pages, _ = pick_pages(Path(folder) / "var", count)
    paths = [path for stage in pages.values() for path in stage]
    random.Random(7).shuffle(paths)
    return paths


def measure(folder, raws, cache, placeholders_max=None, address=LIST, pages_between=0, archiver_max=None):
    from pyramid.paster import get_app
    from webtest import TestApp

    readings = itertools.cycle(pages_to_read(folder, len(raws) * pages_between))
    extra = "\n".join((f"kittypyr.archiver_key = {KEY}", "kittypyr.secret = bench-archive-cost",
                       placeholders_line(placeholders_max),
                       placeholders_line(archiver_max, ARCHIVER_PLACEHOLDERS_SETTING)))
    config = serving_config(folder, cache=cache, extra=extra)
    app = get_app(str(config))
    browser = TestApp(app)
    database = app.registry._zodb_databases[""]
    storage = database.storage
    connection = database.open()
    before = len(connection.root()["kittypyr"].lists[address].messages)
    connection.close()
    start_tid = storage.lastTransaction()
    cpu, wall = [], []
    for raw in raws:
        started_cpu, started = time.process_time(), time.perf_counter()
        browser.post("/api/mailman/archive", {"mlist": address}, headers={"Authorization": f"Token {KEY}"},
                     upload_files=[("message", "message.txt", raw)], status=200)
        cpu.append((time.process_time() - started_cpu) * 1000)
        wall.append((time.perf_counter() - started) * 1000)
        for _ in range(pages_between):
            browser.get(next(readings), status=200)
    written = storage_transactions(storage, start_tid)
    kept = [placeholders_in(connection) for connection in database.pool.all]
    database.close()
    # The first messages warm the caches of a process just started.
    warm = len(raws) // 5
    return {
        "messages before": before,
        "cpu p50": statistics.median(cpu[warm:]),
        "cpu mean": statistics.mean(cpu[warm:]),
        "wall p50": statistics.median(wall[warm:]),
        "records": statistics.mean(records for records, _ in written[warm:]),
        "kB": statistics.mean(size for _, size in written[warm:]) / 1024,
        "placeholders": max(kept),
        "fewest": min(kept),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/linux-mips-2005-2012.mbox.gz"))
    parser.add_argument("--cache", default=production_cache(),
                        help="the cache settings added to zodbconn.uri (production.ini's by default)")
    add_placeholders_option(parser)
    parser.add_argument("--list", default=LIST, help=f"the list the messages go to ({LIST} by default)")
    add_placeholders_option(parser, "--archiver-placeholders-max", ARCHIVER_PLACEHOLDERS_SETTING)
    parser.add_argument("--pages-between", type=int, default=0,
                        help="pages fetched between two messages, from all over the archive (none by default)")
    args = parser.parse_args()
    tag = b"cost%d" % int(time.time())
    raws = corpus_messages(args.corpus, args.messages, tag)
    rows = [(folder, measure(Path(folder), raws, args.cache, args.placeholders_max, args.list, args.pages_between,
                             args.archiver_placeholders_max))
            for folder in args.folders]
    names = list(rows[0][1])
    print(f"{'folder':40} " + " ".join(f"{name:>15}" for name in names))
    for folder, figures in rows:
        print(f"{folder[-40:]:40} " + " ".join(f"{figures[name]:15.1f}" for name in names))
    if len(rows) > 1:
        first, last = rows[0][1], rows[-1][1]
        print(f"{'ratio last / first':40} " + " ".join(f"{last[name] / first[name]:15.2f}" for name in names))
    print("CPU and wall in ms a message, p50 and mean of all but the first fifth; records and kB written a message; "
          "placeholders the connections kept at the end, the most and the fewest")


if __name__ == "__main__":
    main()
