"""Memory and time to import one large message, against its size.

    .venv/bin/python bench/large_message.py [--sizes 16 64 150]

For each size (MB of the message as it is in the mbox), writes an mbox of
three messages, the middle one a note and a base64 attachment of that
size, imports it with ``kittypyr import`` into a fresh archive, and prints
the seconds, the importer's peak RSS and the largest peak of its parser
processes (each read from the process's own high-water mark), each also
as a multiple of the message's size. A server needs
that much memory free to archive such a message from an mbox.
"""

import argparse
import base64
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import PeakWatch  # noqa: E402
from tests.functional import VENV_BIN, write_config  # noqa: E402

LIST = "bench@lists.example.org"


def message(number, attachment=b""):
    head = (f"From: Ann <ann@example.org>\nTo: {LIST}\nSubject: message {number}\n"
            f"Date: Mon, 1 Jan 2024 00:00:0{number} +0000\nMessage-ID: <large-{number}@example.org>\n").encode()
    if not attachment:
        return head + b"\nA few words.\n"
    return (head + b"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=part\n\n"
            b"--part\nContent-Type: text/plain\n\nThe trace is attached.\n"
            b"--part\nContent-Type: application/octet-stream; name=trace.bin\nContent-Transfer-Encoding: base64\n\n"
            + base64.encodebytes(attachment) + b"--part--\n")


def mbox(path, megabytes):
    # Random bytes: an attachment that compresses no better than real ones.
    large = message(2, os.urandom(megabytes * 2**20 * 3 // 4))
    with open(path, "wb") as out:
        for raw in (message(1), large, message(3)):
            out.write(b"From ann@example.org Mon Jan  1 00:00:00 2024\n" + raw + b"\n")
    return len(large)


def import_once(folder, megabytes):
    path = folder / "large.mbox"
    size = mbox(path, megabytes)
    config = write_config(folder)
    started = time.monotonic()
    process = subprocess.Popen([str(VENV_BIN / "kittypyr"), "import", str(config), LIST, str(path), "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peaks = PeakWatch(process.pid)
    while process.poll() is None:
        peaks.sample()
        time.sleep(0.05)
    output = process.stdout.read().decode(errors="replace")
    seconds = time.monotonic() - started
    if process.returncode != 0 or "archived 3" not in output:
        raise RuntimeError(f"the import did not archive all three messages:\n{output}")
    return size, seconds, peaks.own, peaks.largest_child


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 150], help="MB")
    args = parser.parse_args()
    print(f"{'message MB':>10} {'seconds':>8} {'importer MB':>12} {'× size':>7} {'parser MB':>10} {'× size':>7}"
          "   (parser: the largest peak of the importer's parser processes)")
    for megabytes in sorted(args.sizes):
        with tempfile.TemporaryDirectory(prefix="kittypyr-large-") as folder:
            size, seconds, own, parser_peak = import_once(Path(folder), megabytes)
        mb = size / 2**20
        print(f"{mb:10.0f} {seconds:8.1f} {own:12.0f} {own / mb:7.1f} {parser_peak:10.0f} {parser_peak / mb:7.1f}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
