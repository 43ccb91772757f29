"""How long a command takes on a small archive: what a command costs before its own work.

    .venv/bin/python bench/commands.py [--runs 9] [--data DIR]

Makes an archive of one message in DIR (a temporary folder unless given),
then runs each command ``--runs`` times and prints its median wall time and
the slowest run: ``kittypyr --help``, ``kittypyr check``, ``kittypyr
import`` of a one-message mbox (a duplicate after the first run) and
``kittypyr remove-list`` without ``--yes`` (which only counts).
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.functional import kittypyr, mbox_bytes, write_config  # noqa: E402

LIST = "bench@lists.example.org"
MESSAGE = (b"From: someone@example.org\nMessage-ID: <one@example.org>\nSubject: one\n"
           b"Date: Mon, 1 Jan 2024 00:00:00 +0000\n\nThe one message.\n")


def timed(args, runs, succeeds=True):
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        kittypyr(*args, check=succeeds)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), max(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--data", help="folder of the archive (a temporary one by default)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.data or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        config = write_config(folder)
        mbox = folder / "one.mbox"
        mbox.write_bytes(mbox_bytes([MESSAGE]))
        kittypyr("import", config, LIST, mbox, "--policy", "public", check=True)
        print(f"{'command':<28} {'p50 s':>7} {'max s':>7}   ({args.runs} runs each)")
        # remove-list without --yes counts what it would remove and exits 1.
        for name, command, succeeds in (("kittypyr --help", ["--help"], True),
                                        ("kittypyr check", ["check", config], True),
                                        ("kittypyr import (1 message)", ["import", config, LIST, mbox], True),
                                        ("kittypyr remove-list", ["remove-list", config, LIST], False)):
            median, slowest = timed(command, args.runs, succeeds)
            print(f"{name:<28} {median:7.2f} {slowest:7.2f}")


if __name__ == "__main__":
    main()
