"""Robustness on real, messy mail.

    .venv/bin/python bench/robustness.py PATH...

Imports every message of each PATH into its own list of a fresh archive (a
.tar.gz of a Pipermail archive folder is unpacked to a temporary folder and
its month files imported) and
prints, per file: read, archived, duplicates, skipped and failed, with every
reason. Exit status 1 if any message was lost without a reason (read !=
archived + duplicates + skipped + failed) or the import crashed.
"""

import collections
import os
import shutil
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

import transaction  # noqa: E402
from common import FreshArchive  # noqa: E402

from kittypyr.importing import import_mail  # noqa: E402
from kittypyr.mailboxes import pipermail_months  # noqa: E402


def sources_of(path, scratch):
    """The import paths for ``path``: itself, or the folders a tarball unpacks to."""
    if not path.endswith((".tar.gz", ".tgz", ".tar")):
        return [path]
    target = os.path.join(scratch, os.path.basename(path))
    with tarfile.open(path) as tar:
        tar.extractall(target, filter="data")
    return sorted(root for root, _, _ in os.walk(target) if pipermail_months(root))


def main():
    paths = sys.argv[1:]
    scratch = tempfile.mkdtemp(prefix="kittypyr-robustness-")
    if not paths:
        sys.exit(__doc__)
    fresh = FreshArchive()
    unaccounted = 0
    for number, path in enumerate(paths):
        address = f"robustness{number}@lists.example.org"
        try:
            report = import_mail(fresh.archive, address, sources_of(path, scratch), transaction.manager,
                                 progress=False)
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
    shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(1 if unaccounted else 0)


if __name__ == "__main__":
    main()
