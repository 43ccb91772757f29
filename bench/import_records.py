"""What an import reads and writes: the records it loads and stores, by kind.

    .venv/bin/python bench/import_records.py CONFIG LIST PATH... [--batch-size N] [--top 12]

Imports PATH (as ``kittypyr import`` does, in this process) into LIST of
the archive CONFIG names (an .ini; the storage must not be served
meanwhile), and prints the seconds spent storing messages and committing,
then the records loaded from the storage and the records written, by class
(buckets by the kind of their first key), with the bytes written. Run it on
an empty archive and on a large one with the same mail (``bench/scale.py``
makes both) to see what grows with the archive.
"""

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import transaction  # noqa: E402
from ZODB.Connection import Connection  # noqa: E402
from ZODB.serialize import ObjectWriter  # noqa: E402

loaded = collections.Counter()
written = collections.Counter()
written_bytes = collections.Counter()


def kind_of(record):
    name = type(record).__name__
    if name.endswith("Bucket"):
        try:
            key = record.minKey()
        except (ValueError, TypeError):
            return name
        # Buckets of trees keyed by paths, by hashes or by numbers behave apart.
        if isinstance(key, str):
            return f"{name} (str keys{', paths' if key.startswith('/') else ''})"
        return f"{name} ({type(key).__name__} keys)"
    return name


def count_loads(setstate):
    def counted(connection, record):
        loaded[kind_of(record)] += 1
        return setstate(connection, record)
    return counted


def count_writes(serialize):
    def counted(writer, record):
        data = serialize(writer, record)
        kind = kind_of(record)
        written[kind] += 1
        written_bytes[kind] += len(data)
        return data
    return counted


def timed(phases, name, function):
    def run(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            phases[name] += time.perf_counter() - started
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("list_address")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()

    from pyramid.paster import bootstrap

    from kittypyr import importing
    from kittypyr.cli import prepare_list

    Connection.setstate = count_loads(Connection.setstate)
    ObjectWriter.serialize = count_writes(ObjectWriter.serialize)
    phases = collections.Counter()
    importing.Importer._store = timed(phases, "storing", importing.Importer._store)
    manager = transaction.manager
    manager.commit = timed(phases, "committing", manager.commit)

    env = bootstrap(args.config)
    try:
        prepare_list(env["root"], env["registry"], args.list_address)
        manager.commit()
        loaded.clear(), written.clear(), written_bytes.clear(), phases.clear()
        started = time.perf_counter()
        report = importing.import_mail(env["root"], args.list_address, args.paths, manager, progress=False,
                                       batch_size=args.batch_size or importing.DEFAULT_BATCH)
        elapsed = time.perf_counter() - started
    finally:
        env["closer"]()
        for database in getattr(env["registry"], "_zodb_databases", {}).values():
            database.close()
    archived = sum(file.archived for file in report.files)
    print(f"{archived:,} messages archived in {elapsed:.1f} s ({archived / elapsed:,.0f} msg/s): "
          f"storing {phases['storing']:.1f} s, committing {phases['committing']:.1f} s")
    print(f"records loaded: {sum(loaded.values()):,}")
    for kind, count in loaded.most_common(args.top):
        print(f"  {kind:45} {count:>9,}")
    print(f"records written: {sum(written.values()):,}, {sum(written_bytes.values()) / 2**20:,.0f} MB")
    for kind, count in written.most_common(args.top):
        print(f"  {kind:45} {count:>9,} {written_bytes[kind] / 2**20:>7,.1f} MB")


if __name__ == "__main__":
    main()
