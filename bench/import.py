"""Import speed, memory and storage size on a real mail archive.

    .venv/bin/python bench/import.py PATH [--workers N] [--batch-size N]

Imports PATH (mbox, .gz, Maildir or Pipermail month) into a fresh
FileStorage and prints messages per second (end to end, catalog included),
the peak RSS of this process and of its largest parser process, and
Data.fs + blobs after pack against the raw mail size.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import transaction  # noqa: E402
from common import FreshArchive, PeakWatch, cpu_seconds, raw_mail_bytes  # noqa: E402

from kittypyr.importing import DEFAULT_BATCH, default_workers, import_mail  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--list", default="bench@lists.example.org")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--keep", help="a folder to keep the Data.fs in")
    args = parser.parse_args()

    fresh = FreshArchive(args.keep)
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    with PeakWatch(os.getpid()).sampling() as peaks:
        report = import_mail(fresh.archive, args.list, args.paths, transaction.manager,
                             batch_size=args.batch_size, workers=args.workers, progress=False)
    elapsed = time.perf_counter() - started
    own_cpu, child_cpu = (after - before for after, before in zip(cpu_seconds(), cpu_before))
    own_rss, child_rss = peaks.own, peaks.largest_child

    read = report.total("read")
    print(f"messages read       {read}")
    print(f"archived            {report.total('archived')} "
          f"(duplicates {report.total('duplicates')}, skipped {report.total('skipped')}, "
          f"failed {report.total('failed')})")
    print(f"import time         {elapsed:.1f} s with {args.workers} parser process(es)")
    print(f"speed               {read / elapsed:.0f} messages/s")
    # On a shared machine the wall clock varies with the neighbours' load;
    # CPU time shows what the import itself cost.
    print(f"CPU time            {own_cpu:.1f} s (main), {child_cpu:.1f} s (parsers)")
    print(f"peak RSS            {own_rss:.0f} MB (main), {child_rss:.0f} MB (largest parser)")

    before = fresh.storage_bytes()
    fresh.pack()
    data_fs, blobs, blob_disk = fresh.storage_bytes()
    fresh.close()
    raw = raw_mail_bytes(args.paths)
    mb = 1024 * 1024
    print(f"raw mail            {raw / mb:.1f} MB")
    print(f"Data.fs before pack {before[0] / mb:.1f} MB")
    print(f"Data.fs after pack  {data_fs / mb:.1f} MB")
    print(f"blobs               {blobs / mb:.1f} MB ({blob_disk / mb:.1f} MB of disk blocks)")
    print(f"storage / raw       {(data_fs + blobs) / raw:.2f}x "
          f"({(data_fs + blob_disk) / raw:.2f}x counting disk blocks)")
    for line in report.summary()[1:20]:
        print("  " + line)


if __name__ == "__main__":
    main()
