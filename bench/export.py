"""mbox export speed and memory over HTTP on a real archive, served by waitress.

    .venv/bin/python bench/export.py [--data DIR] [--corpus PATH] [--runs N] [--round-trip]

Imports the corpus into DIR (skipped when DIR already holds an archive),
serves it with ``pserve`` on a free loopback port, then downloads the
whole list's export ``--runs`` times and one month's, printing for each the
time to the first byte, the time to the last, the size and the server's
resident memory before and after it: memory flat in the size of the list
means the whole list leaves it where a month does (it grows over the first
runs while the pool's connections fill their object caches, then stays).
The server's CPU seconds, and this process's own (reading the download),
are printed beside the wall-clock times, which a busy machine stretches:
where the two processes' CPU seconds together are far below the wall
time, the export waited for a processor, not for its own work. Last, the
same export is made in this process without HTTP (``stream_mbox`` over the
storage, after the server has stopped), its CPU split between the
catalog's query and the streaming. The last whole export is read back with kittypyr's own
mbox reader and its messages counted; with ``--round-trip`` it is also
imported into an empty archive, which is compared with the first: the same
hashes, threads, parents and original bytes.
"""

import argparse
import gzip
import http.client
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import served_archive  # noqa: E402

LIST = "bench@lists.example.org"


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds_of(pid):
    """User and system CPU seconds the process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def download(port, url, keep=None):
    """``(seconds to the first byte, seconds to the last, bytes)``; the body is written to ``keep``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    connection.request("GET", url)
    response = connection.getresponse()
    if response.status != 200:
        raise RuntimeError(f"{url} answered {response.status}")
    first = None
    size = 0
    out = open(keep, "wb") if keep else None
    try:
        while True:
            chunk = response.read1(1 << 20)
            if not chunk:
                break
            if first is None:
                first = time.perf_counter() - started
            size += len(chunk)
            if out is not None:
                out.write(chunk)
    finally:
        if out is not None:
            out.close()
    total = time.perf_counter() - started
    connection.close()
    return first or total, total, size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder for the archive (kept; reused when present)")
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/linux-mips-2005-2012.mbox.gz"))
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--month", default="2009-06", help="the month exported for comparison (YYYY-MM)")
    parser.add_argument("--round-trip", action="store_true",
                        help="import the whole export into an empty archive and compare the two")
    parser.add_argument("--compare", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
        return

    started = time.perf_counter()
    with served_archive(args.data, args.corpus, LIST, "kittypyr-export-") as (config, port, server, _):
        print(f"server up in {time.perf_counter() - started:.1f} s (a new index is filled at the first start)")
        year, month = args.month.split("-")
        following = f"{int(year) + (month == '12'):04d}-{int(month) % 12 + 1:02d}"
        month_url = f"/list/{LIST}/export/month.mbox.gz?start={args.month}-01&end={following}-01"
        whole_url = f"/list/{LIST}/export/bench.mbox.gz"
        print(f"server RSS at start: {rss_mb(server.pid):.0f} MB")
        print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'export':26} {'first byte s':>12} {'total s':>8} {'server CPU s':>12} {'client CPU s':>12} "
              f"{'MB':>6} {'RSS before MB':>13} {'RSS after MB':>12} {'load':>5}")

        def measure(label, url, keep=None):
            before = rss_mb(server.pid)
            cpu = cpu_seconds_of(server.pid)
            own = time.process_time()
            first, total, size = download(port, url, keep=keep)
            print(f"{label:26} {first:12.3f} {total:8.3f} {cpu_seconds_of(server.pid) - cpu:12.2f} "
                  f"{time.process_time() - own:12.2f} {size / 1e6:6.1f} {before:13.0f} {rss_mb(server.pid):12.0f} "
                  f"{os.getloadavg()[0]:5.1f}")

        measure(f"month {args.month}", month_url)
        kept = Path(tempfile.mkdtemp(prefix="kittypyr-export-")) / "bench.mbox.gz"
        for run in range(1, args.runs + 1):
            measure(f"whole list, run {run}", whole_url, keep=kept if run == args.runs else None)
        measure(f"month {args.month} again", month_url)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    in_process(config)

    from kittypyr.mailboxes import read_mail

    plain = kept.with_suffix("")
    with gzip.open(kept) as source, open(plain, "wb") as target:
        while chunk := source.read(1 << 20):
            target.write(chunk)
    count = sum(1 for _ in read_mail(plain))
    print(f"the whole export holds {count} messages ({plain.stat().st_size / 1e6:.0f} MB of mbox)")
    plain.unlink()
    if args.round_trip:
        round_trip(config, kept)
    kept.unlink()
    kept.parent.rmdir()


def in_process(config):
    """The whole list's export made here, without HTTP: CPU and wall seconds of the query and of the stream."""
    from pyramid.paster import bootstrap

    from kittypyr.exports import export_docids, stream_mbox, whole_list_query

    with bootstrap(str(config)) as env:
        archive = env["root"]
        db = archive._p_jar.db()
        for run in (1, 2):
            cpu, wall = time.process_time(), time.perf_counter()
            docids = export_docids(archive, whole_list_query(archive.lists[LIST]))
            query_cpu, query_wall = time.process_time() - cpu, time.perf_counter() - wall
            cpu, wall = time.process_time(), time.perf_counter()
            size = sum(len(piece) for piece in stream_mbox(db, docids))
            print(f"in process, run {run}: query {query_cpu:.2f} s CPU ({query_wall:.2f} s), stream "
                  f"{time.process_time() - cpu:.2f} s CPU ({time.perf_counter() - wall:.2f} s), "
                  f"{size / 1e6:.1f} MB, load {os.getloadavg()[0]:.1f}")


def round_trip(config, export):
    """Import ``export`` into an empty archive, then compare it with the one it came from."""
    import subprocess

    from tests.functional import kittypyr, write_config

    folder = Path(tempfile.mkdtemp(prefix="kittypyr-export-again-"))
    other = write_config(folder)
    started = time.perf_counter()
    kittypyr("import", other, LIST, export, "--quiet", check=True, timeout=3600)
    print(f"the export imported into an empty archive in {time.perf_counter() - started:.0f} s")
    # In a child: the two storages are opened by a process of their own.
    subprocess.run([sys.executable, __file__, "--compare", str(config), str(other)], check=True)


def compare(config, other):
    """Print whether two archives hold the same messages, original bytes, hashes and threads."""
    import hashlib

    from pyramid.paster import bootstrap

    def contents(path):
        found = {}
        with bootstrap(path) as env:
            mailing_list = env["root"].lists[LIST]
            for count, (name, message) in enumerate(mailing_list.messages.items()):
                original = message.original_bytes()
                # An mbox ends every message with a line end: one without gains it.
                if not original.endswith(b"\n"):
                    original += b"\n"
                found[name] = (message.thread, message.parent, hashlib.sha1(original).hexdigest())
                if count % 1000 == 0:
                    message._p_jar.cacheGC()
            threads = len(mailing_list.threads)
        return found, threads

    first, first_threads = contents(config)
    second, second_threads = contents(other)
    differing = [name for name in first if first[name] != second.get(name)]
    print(f"round trip: {len(first)} and {len(second)} messages, {first_threads} and {second_threads} threads; "
          f"{len(set(first) ^ set(second))} hashes in one only; {len(differing)} messages whose thread, "
          f"parent or original bytes differ")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
