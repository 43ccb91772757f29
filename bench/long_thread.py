"""What a reply costs in a long thread: the bytes it writes and the time to archive it, as the thread grows.

    .venv/bin/python bench/long_thread.py [--replies 400 4000] [--shape flat|deep|both] [--data DIR]

For each count N of ``--replies`` and each shape, a new archive (under
``--data``, a temporary folder by default) receives one first message and
N replies through Mailman's archiver API (in process, through WebTest, one
request and one transaction a message, as ``bench/archive_cost.py`` does).
``flat``: every reply answers the first message (an announcement with a
thousand "+1"); ``deep``: each reply answers the one before (a long
argument). Printed for the last tenth of the replies: the records and kB
each transaction wrote, the CPU ms a message (p50); then the storage's
size per message, and the time to render the thread's first page. A reply
should cost the same in a thread of 4,000 as in one of 400.
"""

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from archive_cost import storage_transactions  # noqa: E402
from common import serving_config  # noqa: E402

KEY = "bench-long-thread-key"
LIST = "thread@lists.example.org"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


def reply(number, parent, sender_count=300):
    """Message ``number`` (0 the first) of the thread, answering ``parent``'s number."""
    date = (START + timedelta(minutes=number)).strftime("%a, %d %b %Y %H:%M:%S +0000")
    lines = [f"From: Person {number % sender_count} <person{number % sender_count}@example.org>",
             f"To: {LIST}", f"Date: {date}", f"Message-ID: <m{number}@bench.example.org>",
             "Subject: " + ("A long conversation" if number == 0 else "Re: A long conversation")]
    if parent is not None:
        lines += [f"In-Reply-To: <m{parent}@bench.example.org>", f"References: <m{parent}@bench.example.org>"]
    body = f"Reply number {number}, with a few words of its own about the question at hand.\n"
    return ("\r\n".join(lines) + "\r\n\r\n" + body).encode()


def measure(folder, replies, shape):
    from pyramid.paster import get_app
    from webtest import TestApp

    (folder / "var").mkdir(parents=True)
    extra = f"kittypyr.archiver_key = {KEY}\nkittypyr.secret = bench-long-thread"
    app = get_app(str(serving_config(folder, extra=extra)))
    browser = TestApp(app)
    storage = app.registry._zodb_databases[""].storage
    post = dict(params={"mlist": LIST}, headers={"Authorization": f"Token {KEY}"}, status=200)
    browser.post("/api/mailman/archive", upload_files=[("message", "m.txt", reply(0, None))], **post)
    last_tenth = replies - replies // 10
    cpu, start_tid = [], None
    for number in range(1, replies + 1):
        if number == last_tenth:
            start_tid = storage.lastTransaction()
        started = time.process_time()
        parent = 0 if shape == "flat" else number - 1
        browser.post("/api/mailman/archive", upload_files=[("message", "m.txt", reply(number, parent))], **post)
        if number >= last_tenth:
            cpu.append((time.process_time() - started) * 1000)
    written = storage_transactions(storage, start_tid)
    thread_url = browser.get(f"/list/{LIST}/").html.select_one("a[href*='/thread/']")["href"]
    browser.get(thread_url, status=200)
    started = time.perf_counter()
    page = browser.get(thread_url, status=200)
    page_ms = (time.perf_counter() - started) * 1000
    app.registry._zodb_databases[""].close()
    size = (folder / "var" / "Data.fs").stat().st_size
    return {
        "records": statistics.mean(records for records, _ in written),
        "kB": statistics.mean(size for _, size in written) / 1024,
        "cpu p50": statistics.median(cpu),
        "Data.fs kB/msg": size / 1024 / (replies + 1),
        "page ms": page_ms,
        "page kB": len(page.body) / 1024,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, nargs="+", default=[400, 4000])
    parser.add_argument("--shape", choices=["flat", "deep", "both"], default="both")
    parser.add_argument("--data", help="where the archives are made (a temporary folder by default)")
    args = parser.parse_args()
    shapes = ["flat", "deep"] if args.shape == "both" else [args.shape]
    with tempfile.TemporaryDirectory(dir=args.data) as data:
        rows = []
        for shape in shapes:
            for replies in args.replies:
                rows.append((f"{shape} {replies}", measure(Path(data) / f"{shape}-{replies}", replies, shape)))
    names = list(rows[0][1])
    print(f"{'thread':14} " + " ".join(f"{name:>15}" for name in names))
    for label, figures in rows:
        print(f"{label:14} " + " ".join(f"{figures[name]:15.1f}" for name in names))
    print("records, kB written and CPU ms a reply over the last tenth of the replies; the storage's size a message; "
          "the thread page's render time (warm) and size")


if __name__ == "__main__":
    main()
