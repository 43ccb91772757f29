"""What an archive's storage holds: its records by class, and the memory FileStorage's index of them takes.

    .venv/bin/python bench/records.py DIR [DIR ...] [--top 16]

Each DIR is an archive folder whose storage is ``DIR/var/Data.fs`` (as
``bench/scale.py`` and ``bench/search.py`` leave them; pack first to count
only the records in use). Opens each read-only, prints the number of
records and the memory its in-memory index of them took to load (what
every process serving that archive from FileStorage holds), then the
classes with the most records, with their mean size as pickled.
"""

import argparse
import collections
import os
import sys

from ZODB.FileStorage import FileStorage
from ZODB.utils import get_pickle_metadata


def resident_mb():
    # Read here, not with bench/common.py: importing it loads kittypyr and
    # Pyramid, whose freed memory the index then fills without a rise in
    # RSS (0.2 MB measured for 165,000 records, against 2.1 MB).
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def count(path):
    """``(records, MB the index took, {class: (records, bytes)})`` of the FileStorage at ``path``."""
    before = resident_mb()
    storage = FileStorage(path, read_only=True)
    index_mb = resident_mb() - before
    records, sizes = collections.Counter(), collections.Counter()
    try:
        for oid in storage._index.keys():  # FileStorage's own index: every live record once
            data, _ = storage.load(oid)
            name = "%s.%s" % get_pickle_metadata(data)
            records[name] += 1
            sizes[name] += len(data)
    finally:
        storage.close()
    return sum(records.values()), index_mb, {name: (records[name], sizes[name]) for name in records}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", metavar="DIR")
    parser.add_argument("--top", type=int, default=16)
    args = parser.parse_args()
    for folder in args.folders:
        path = os.path.join(folder, "var", "Data.fs")
        if not os.path.exists(path):
            sys.exit(f"{path}: no such storage (give an archive folder holding var/Data.fs)")
        total, index_mb, by_class = count(path)
        print(f"{folder}: {total:,} records; FileStorage's index of them {index_mb:.1f} MB "
              f"({index_mb * 1e6 / max(total, 1):.1f} bytes a record)")
        ranked = sorted(by_class.items(), key=lambda item: -item[1][0])[: args.top]
        for name, (records, size) in ranked:
            print(f"  {records:>10,}  {size // max(records, 1):>7,} B  {name}")


if __name__ == "__main__":
    main()
