"""Robustness on real, messy mail.

    .venv/bin/python bench/robustness.py PATH...

Imports every message of each PATH into its own list of a fresh archive and
prints, per file: read, archived, duplicates, skipped and failed, with every
reason. Exit status 1 if any message was lost without a reason (read !=
archived + duplicates + skipped + failed) or the import crashed.
"""

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import transaction  # noqa: E402
from common import FreshArchive  # noqa: E402

from kittypyr.importing import import_mail  # noqa: E402


def main():
    paths = sys.argv[1:]
    if not paths:
        sys.exit(__doc__)
    fresh = FreshArchive()
    unaccounted = 0
    for number, path in enumerate(paths):
        address = f"robustness{number}@lists.example.org"
        try:
            report = import_mail(fresh.archive, address, [path], transaction.manager, progress=False)
        except Exception as exc:  # the point of this script is to find these
            print(f"{path}: CRASHED: {exc!r}")
            unaccounted += 1
            continue
        counts = {a: report.total(a) for a in ("read", "archived", "duplicates", "skipped", "failed")}
        lost = counts["read"] - counts["archived"] - counts["duplicates"] - counts["skipped"] - counts["failed"]
        unaccounted += lost
        print(f"{path}: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f", unaccounted {lost}")
        reasons = collections.Counter()
        for file_report in report.files:
            reasons.update(file_report.skipped)
            reasons.update(reason.split(":")[0] + ": " + reason.split(":", 1)[-1][:80]
                           for _, reason in file_report.failed)
            if file_report.error:
                print(f"  file error: {file_report.error}")
        for reason, count in reasons.most_common():
            print(f"  {count:6d}  {reason}")
    fresh.close()
    sys.exit(1 if unaccounted else 0)


if __name__ == "__main__":
    main()
