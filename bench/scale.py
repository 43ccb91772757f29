"""Ten times the mail: one list ten times as long, imported a corpus at a time.

    .venv/bin/python bench/scale.py CORPUS [--data DIR] [--blocks 10] [--requests 25] [--layout long|dense|lists]

Block k is CORPUS again with every Message-ID, In-Reply-To and References
id rewritten (``<b{k}.id>``, block 1 as it is), so each block is new mail,
threaded within itself. Where it lies in time is the layout:

- ``long`` (the default): each block comes before the one before it in
  time, as a list that lived ten times as long whose older archives are
  brought in after its recent mail (block 1 is the newest, so the list's
  overview shows the same recent mail at 1× and at 10×). kittypyr believes
  only dates between 1980 and today, so the corpus's span is squeezed to
  fit: the blocks share the years since 1980 (4.7 years each with ten
  blocks), every Date header moved and scaled into its block's years, the
  mail's order and spacing kept. A month holds about the same mail in
  every block.
- ``dense``: every block keeps the corpus's dates, so the list gets ten
  times as dense, each month holding ten times the threads, and each block
  is filed among the ones before it rather than after them. Block k's
  dates are moved k-1 seconds on (``apart``): ten messages sent in the
  same second, and as many times as the corpus has messages, is no list's
  mail, and it made every second's entry of the date index a set of its
  own, a record written by each message (kittypyr.catalog.SparseFieldIndex).
- ``lists``: ten lists rather than one list ten times as long: block k
  goes to a list of its own (``scale-k@``; block 1 to ``scale@``) with the
  corpus's dates (k-1 seconds on, as ``dense``), as a site that gains lists. Every list's containers
  stay the size of one corpus; what the lists share (the catalog, the
  people) grows. The pages timed are block 1's list's, and the storage per
  message is the whole archive's.

Each block is imported with ``kittypyr import`` into one FileStorage, and
printed per block: msg/s, CPU seconds, the peak RSS of the importer and
of its parser processes, the storage's size per message (Data.fs,
unpacked, and blobs) and against the raw mail; at the end, the same
packed. After the first and the last block the archive is
served by one waitress process and printed: p50 of the list overview, a
month, a thread, a message and a search (the same pages at 1× and at 10×:
the first block's), and the serving process's RSS. Then block 1 is
imported and served again, into an archive of its own: the machine's speed
drifts over a long run, and that 1× is measured under the same conditions
as the last block (both references are printed). Last, after the pack,
the last archive and block 1 again are served twice each, in turns, and
the lower p50 of each page kept: right after an import the machine is
still busy with what it wrote.

Bounded: ``--blocks`` imports of at most ``--import-timeout`` seconds each,
``--requests`` requests per page.
"""

import argparse
import email.utils
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import PeakWatch, process_memory_mb, serving_config  # noqa: E402
from tests.functional import VENV_BIN, free_port, mbox_bytes, wait_for_port  # noqa: E402

LIST = "scale@lists.example.org"
ID_HEADERS = (b"message-id", b"in-reply-to", b"references")
SEARCH_WORDS = ("cache", "kernel patch", "tlb", "octeon", "interrupt", "binutils")


def rewrite_ids(raw, block, moved=None):
    """``raw`` with the ids of its Message-ID, In-Reply-To and References (folded lines too) prefixed.

    ``moved``, when given, maps the message's date (an aware datetime) to
    the one its Date header says instead.
    """
    if block == 1 and moved is None:
        return raw
    end = raw.find(b"\n\n")
    head, body = (raw, b"") if end < 0 else (raw[:end], raw[end:])
    prefix = b"<b%d." % block
    lines, rewriting = [], False
    for line in head.split(b"\n"):
        if line[:1] not in (b" ", b"\t"):
            name = line.split(b":", 1)[0].strip().lower()
            rewriting = block > 1 and name in ID_HEADERS
            if moved is not None and name == b"date":
                line = _moved_date(line, moved)
        lines.append(re.sub(rb"<(?=[^<>\s]+>)", prefix, line) if rewriting else line)
    return b"\n".join(lines) + body


def _date_of(raw):
    match = re.search(rb"^Date:[ \t]*(.+)$", raw[:raw.find(b"\n\n")], re.MULTILINE | re.IGNORECASE)
    try:
        date = email.utils.parsedate_to_datetime(match.group(1).decode("latin-1").strip())
    except (AttributeError, TypeError, ValueError, IndexError):
        return None
    return date if date.tzinfo is not None else date.replace(tzinfo=timezone.utc)


def _moved_date(line, moved):
    try:
        date = email.utils.parsedate_to_datetime(line.split(b":", 1)[1].decode("latin-1").strip())
    except (TypeError, ValueError, IndexError):
        return line  # kept as it is: kittypyr dates such mail by what else it has
    if date.tzinfo is None:
        date = date.replace(tzinfo=timezone.utc)
    return b"Date: " + email.utils.format_datetime(moved(date).astimezone(timezone.utc)).encode()


def block_timeline(raws, blocks):
    """``moved(block)``: for ``--layout long``, the date map of each block.

    The corpus's span (its 1st to 99th percentile of dates: a few mails are
    dated decades off) is scaled into one block's share of the years from
    1980 to today. Block 1 is the newest, ending now; block k ends where
    block k-1 starts, as when a list's older archives are brought in after
    its recent mail: the list's recent pages show the same mail at 1× as at
    10×.
    """
    dates = sorted(date for date in map(_date_of, raws) if date is not None)
    first, last = dates[len(dates) // 100], dates[-len(dates) // 100 - 1]
    end = datetime.now(timezone.utc) - timedelta(days=1)
    share = (end - datetime(1980, 1, 3, tzinfo=timezone.utc)) / blocks
    scale = share / (last - first)

    def moved(block):
        block_start = end - share * block
        # Mail dated off the corpus's span goes to its block's first or last moment.
        return lambda date: block_start + (min(max(date, first), last) - first) * scale
    return moved


def apart(block):
    """For ``--layout dense`` and ``lists``: the date map of each block, ``block - 1`` seconds on (block 1 as it is)."""
    return None if block == 1 else lambda date: date + timedelta(seconds=block - 1)


def block_mail(raws, block, timeline):
    """The corpus as block ``block``: its ids rewritten, and its dates moved when ``timeline`` is given."""
    moved = timeline(block) if timeline is not None else None
    return [rewrite_ids(raw, block, moved) for raw in raws]


def storage_bytes(var):
    data_fs = (var / "Data.fs").stat().st_size
    blobs = sum(path.stat().st_size for path in (var / "blobs").rglob("*") if path.is_file())
    return data_fs, blobs


def list_of(block, layout):
    """The list block ``block`` goes to: its own one for ``--layout lists``, the one list otherwise."""
    return f"scale-{block}@lists.example.org" if layout == "lists" and block > 1 else LIST


def import_block(config, mbox, timeout, list_address=LIST):
    """(seconds, CPU seconds of the importer and its parsers, the importer's peak RSS, the largest peak
    RSS of its parser processes (MB), messages archived)."""
    started = time.monotonic()
    # A file, not a pipe: a pipe nobody reads while waiting could fill and stop the importer.
    log_path = Path(mbox).with_suffix(".log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(VENV_BIN / "kittypyr"), "import", str(config), list_address, str(mbox),
                                    "--policy", "public", "--quiet"], stdout=log, stderr=subprocess.STDOUT)
    deadline = started + timeout
    peaks = PeakWatch(process.pid)
    while True:
        peaks.sample()
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError(f"import of {mbox} took over {timeout} s")
        time.sleep(0.2)
    output = log_path.read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"import failed:\n{output}")
    # wait4's times include the parser processes the importer waited for.
    cpu = usage.ru_utime + usage.ru_stime
    archived = int(re.search(r"archived (\d+)", output).group(1))
    return time.monotonic() - started, cpu, peaks.own, peaks.largest_child, archived


def pick_pages(var):
    """The first block's pages to time, chosen once: {kind: [path]}."""
    import random

    from ZODB import DB
    from ZODB.FileStorage import FileStorage

    from kittypyr.bootstrap import ROOT_KEY

    db = DB(FileStorage(str(var / "Data.fs"), blob_dir=str(var / "blobs"), read_only=True))
    try:
        mailing_list = db.open().root()[ROOT_KEY].lists[LIST]
        chance = random.Random(10)
        base = f"/list/{LIST}/"
        busiest = sorted(mailing_list.activity.per_month.items(), key=lambda item: -item[1])[:3]
        return {
            "overview": [base],
            "month": [f"{base}{m[:4]}/{int(m[5:7])}/" for m, _ in busiest],
            "thread": [f"{base}thread/{key}/" for key in chance.sample(list(mailing_list.threads.keys()), 10)],
            "message": [f"{base}message/{key}/" for key in chance.sample(list(mailing_list.messages.keys()), 10)],
            "search": ["/search?" + urllib.parse.urlencode({"q": words, "mlist": LIST}) for words in SEARCH_WORDS],
        }
    finally:
        db.close()


def time_pages(folder, pages, requests, extra=""):
    """{kind: p50 ms} and the serving process's RSS (MB) over ``pages``, each page warmed once first.

    ``extra``: settings added to the server's .ini, a line each.
    """
    # The import just written (gigabytes at 10x) goes to disk first: its
    # write-back would otherwise land in the pages' timings.
    os.sync()
    port = free_port()
    config = serving_config(folder, port=port, extra=extra)
    log = open(folder / "server.log", "ab")
    server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=log, stderr=log)
    try:
        wait_for_port(port, timeout=600, process=server)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        figures = {}
        for kind, paths in pages.items():
            timings = []
            for path in paths:
                for attempt in range(requests + 1):
                    started = time.perf_counter()
                    connection.request("GET", path)
                    response = connection.getresponse()
                    response.read()
                    if response.status != 200:
                        raise RuntimeError(f"{path} answered {response.status}")
                    if attempt:  # the first warms that page
                        timings.append((time.perf_counter() - started) * 1000)
            figures[kind] = statistics.median(timings)
        connection.close()
        return figures, process_memory_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


# Rounds of the final timing of the last archive and of block 1 again, in turns.
TURNS = 2


def pages_in_turns(folders, pages, requests, rounds):
    """``[(figures, rss)]`` of each of ``folders``, served ``rounds`` times each in turns: the lower of each."""
    best = [None] * len(folders)
    for _ in range(rounds):
        for at, folder in enumerate(folders):
            figures, rss = time_pages(folder, pages, requests)
            if best[at] is None:
                best[at] = (figures, rss)
            else:
                kept, kept_rss = best[at]
                best[at] = ({kind: min(ms, kept[kind]) for kind, ms in figures.items()}, min(rss, kept_rss))
    return best


def print_pages(figures, serving_rss):
    print("      pages p50 ms: " + ", ".join(f"{kind} {ms:.1f}" for kind, ms in figures.items())
          + f"; serving process RSS {serving_rss:.0f} MB", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--data", default="/tmp/kittypyr-scale", help="folder of the archive (made anew)")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--requests", type=int, default=25, help="timed requests per page")
    parser.add_argument("--import-timeout", type=float, default=3600)
    parser.add_argument("--layout", choices=("long", "dense", "lists"), default="long",
                        help="blocks one after another in time, all in the corpus's months, or a list each")
    args = parser.parse_args()

    from kittypyr.mailboxes import read_mail

    folder = Path(args.data)
    if (folder / "var").exists():
        parser.error(f"{folder} holds an archive already: remove it first")
    folder.mkdir(parents=True, exist_ok=True)
    config = serving_config(folder)
    var = folder / "var"
    raws = [m.raw for m in read_mail(args.corpus)]
    timeline = block_timeline(raws, args.blocks) if args.layout == "long" else apart
    print(f"{len(raws)} messages in {args.corpus}, {args.blocks} blocks laid out {args.layout}; machine load "
          f"{os.getloadavg()[0]:.1f} (2 cores, shared: figures are noisy)", flush=True)
    print(f"{'block':>5} {'messages':>9} {'msg/s':>7} {'cpu s':>6} {'RSS MB':>7} {'parser MB':>10} "
          f"{'bytes/msg':>10} {'× raw':>6}   (cpu: the importer's and its parsers'; RSS: the importer's peak; "
          f"parser: the largest peak of its parser processes)", flush=True)
    raw_total = 0
    counts = {}  # list address -> its messages
    rates = {}
    timed = {}
    pages = None
    for block in range(1, args.blocks + 1):
        mbox = folder / "block.mbox"
        mail = block_mail(raws, block, timeline)
        mbox.write_bytes(mbox_bytes(mail))
        list_address = list_of(block, args.layout)
        seconds, cpu, rss, parser_rss, archived = import_block(config, mbox, args.import_timeout, list_address)
        mbox.unlink()
        rates[block] = archived / seconds
        raw_total += sum(len(raw) for raw in mail)
        data_fs, blobs = storage_bytes(var)
        # Each block changes its own list only: that list is counted again, the others are as they were.
        counts[list_address] = json.loads(subprocess.run(
            [str(VENV_BIN / "kittypyr"), "info", str(config), list_address, "--json"],
            check=True, capture_output=True, text=True).stdout)["messages"]
        count = sum(counts.values())
        print(f"{block:5} {count:9} {archived / seconds:7.0f} {cpu:6.0f} {rss:7.0f} {parser_rss:10.0f} "
              f"{(data_fs + blobs) / count:10.0f} {(data_fs + blobs) / raw_total:6.2f}", flush=True)
        if block == 1:
            pages = pick_pages(var)
        if block in (1, args.blocks):
            timed[block] = time_pages(folder, pages, args.requests)
            print_pages(*timed[block])
    if args.blocks > 1:
        # The machine's speed drifts over a run of an hour or more (shared
        # cores), so block 1 and its pages measured at the start are a poor
        # reference for the last block's: they are measured again, on an
        # archive of block 1 alone, right after it.
        again = folder / "again"
        again.mkdir()
        mbox = again / "block.mbox"
        mbox.write_bytes(mbox_bytes(block_mail(raws, 1, timeline)))
        seconds, cpu, rss, parser_rss, archived = import_block(serving_config(again), mbox, args.import_timeout)
        mbox.unlink()
        rates["again"] = archived / seconds
        print(f"block 1 again, into an empty archive of its own: {rates['again']:.0f} msg/s, cpu {cpu:.0f} s, "
              f"RSS {rss:.0f} MB", flush=True)
        timed["again"] = time_pages(again, pages, args.requests)
        print_pages(*timed["again"])
    # The import's unpacked figure holds every revision of the aggregates
    # it rewrote; a pack leaves the current state only.
    subprocess.run([str(VENV_BIN / "kittypyr"), "pack", str(config)], check=True, capture_output=True,
                   timeout=args.import_timeout)
    data_fs, blobs = storage_bytes(var)
    print(f"packed: {(data_fs + blobs) / count:.0f} bytes/msg, {(data_fs + blobs) / raw_total:.2f} × the raw mail "
          f"(Data.fs {data_fs / 2 ** 20:.0f} MB, blobs {blobs / 2 ** 20:.0f} MB)", flush=True)
    if len(timed) == 3:
        (first, first_rss), (last, last_rss), (again, again_rss) = timed[1], timed[args.blocks], timed["again"]
        # Right after an import the machine is still busy with it (its
        # write-back, the page cache): the two archives' pages are timed
        # once more, packed, in turns, and the lower p50 of each kept.
        turns = pages_in_turns([folder, folder / "again"], pages, args.requests, TURNS)
        (many_turn, many_turn_rss), (one_turn, one_turn_rss) = turns
        scale = f"{args.blocks}×"
        print(f"\n{'':10} {'1×':>8} {scale:>8} {'ratio':>6} {'1× again':>9} {'ratio':>6}   "
              f"{'in turns: ' + scale:>15} {'1× again':>9} {'ratio':>6}")
        rows = [(kind, first[kind], last[kind], again[kind], many_turn[kind], one_turn[kind], ".1f") for kind in first]
        rows.append(("RSS MB", first_rss, last_rss, again_rss, many_turn_rss, one_turn_rss, ".0f"))
        for kind, one, many, one_again, many_turn, one_turn, form in rows:
            print(f"{kind:10} {one:8{form}} {many:8{form}} {many / one:6.2f} {one_again:9{form}} "
                  f"{many / one_again:6.2f}   {many_turn:15{form}} {one_turn:9{form}} {many_turn / one_turn:6.2f}")
        print(f"{'import':10} {rates[1]:8.0f} {rates[args.blocks]:8.0f} {rates[args.blocks] / rates[1]:6.2f} "
              f"{rates['again']:9.0f} {rates[args.blocks] / rates['again']:6.2f}")
        print(f"(pages p50 ms; 1× again: measured right after {scale}; in turns: both archives packed, "
              f"served {TURNS} times each in turns, the lower p50 of each page and RSS kept. "
              f"import: msg/s of block 1 and of the last block)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
