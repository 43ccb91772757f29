"""The import's progress bar: messages done out of an estimate made first, with a percentage and time left.

Counting reads the input once more before the import, quickly (no
parsing: only envelope lines of mboxes and the files of Maildirs), and
only when a bar is shown on a terminal. The count is an estimate: a
doubtful envelope line may be judged otherwise by the import.
"""

import sys
from pathlib import Path

from tqdm import tqdm

from kittypyr.mailboxes import DECOMPRESSION_ERRORS, open_content

_READ = 1 << 20


def _count_envelopes(path):
    """Lines starting ``From `` at the start of the file or after a blank line."""
    count = 0
    previous_blank = True
    tail = b""
    with open_content(path) as stream:
        while True:
            chunk = stream.read(_READ)
            if not chunk:
                break
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                if previous_blank and line.startswith(b"From "):
                    count += 1
                previous_blank = not line.strip()
    if tail and previous_blank and tail.startswith(b"From "):
        count += 1
    return count


def _count_maildir(path):
    return sum(1 for sub in ("cur", "new") if (path / sub).is_dir()
               for entry in (path / sub).iterdir() if not entry.name.startswith("."))


def estimate_messages(paths):
    """About how many messages the files and folders of ``paths`` hold (0 for what cannot be read)."""
    total = 0
    for path in map(Path, paths):
        try:
            if path.is_dir():
                total += _count_maildir(path)
            elif path.is_file():  # a pipe read here would be lost to the import
                total += max(_count_envelopes(path), 1)
        except (OSError, *DECOMPRESSION_ERRORS):
            continue
    return total


def progress_bar(description, total, file=None, unit="msg"):
    """A bar of ``total`` messages (or other ``unit``): count, percentage, rate and time left."""
    return tqdm(total=total or None, unit=unit, desc=description, file=file or sys.stderr,
                dynamic_ncols=True, smoothing=0.1)
