"""How many of a real Pipermail folder's per-message pages redirect to the right message.

    .venv/bin/python bench/pipermail.py SOURCE [--list ADDRESS] [--work DIR] [--variant both|as-is|pages-only]
                                         [--period month|year|quarter|week|day]

SOURCE is a Pipermail archive folder or a .tar.gz of one (extracted into
the work folder). The folder is imported with ``kittypyr import`` into a
new storage, then every per-message page's old URL,
``/pipermail/<name>/<volume>/<NNNNNN>.html``, is asked of the application
(in process, through WebTest) and the message its 301 leads to is checked.

The right message is known from the folder's own ``database/`` records,
where the page has one: the article's Message-ID (and, when several
archived messages carry that Message-ID, the one whose date is nearest the
page's). A page without a record is right when the message shows the
page's subject and author and a date within a day of the page's.

``as-is`` imports the folder with its ``database/``; ``pages-only``
imports a copy without it (links to everything else), so that only what
the pages show is used to match, while the records still judge the result.
``--period`` other than month first files the folder again as Pipermail
would have with that archive period (``2007``, ``2007q1``,
``Week-of-Mon-20070305``, ``20070305``): its month files' messages into
volume files by their envelope line's local date, its pages into volume
folders by the date they show (both as links or new files in the work
folder), so that a folder of another period is measured the same way.

Prints, per variant: the import's time and summary, the share of pages
right, and how each of the others fails, with examples; then how many of
the scrubbed-attachment links the pages hold
(``/pipermail/<name>/attachments/<day>/<id>/<file>``) lead, through their
301, to the attachment itself with the folder's file's very bytes.
"""

import argparse
import gzip
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pyramid.scripting import prepare  # noqa: E402
from webtest import TestApp  # noqa: E402

from kittypyr import main  # noqa: E402
from kittypyr.mailboxes import pipermail_months  # noqa: E402
from kittypyr.msgid import normalize_message_id  # noqa: E402
from kittypyr.pipermail.mapping import person_key, subject_key  # noqa: E402
from kittypyr.pipermail.pages import read_folder  # noqa: E402
from tests.functional import VENV_BIN, write_config  # noqa: E402


def find_folder(source, work):
    """The Pipermail folder of ``source`` (extracting a tarball into ``work``)."""
    source = Path(source)
    if source.is_file():
        target = work / "source"
        if not target.exists():
            with tarfile.open(source) as tar:
                tar.extractall(target, filter="data")
        source = target
    for root, dirs, files in os.walk(source):
        if pipermail_months(root):
            return Path(root)
    raise SystemExit(f"no Pipermail month file under {source}")


def pages_only_copy(folder, work):
    """A folder with everything of ``folder`` but its database/, as links."""
    copy = work / "pages-only" / folder.name
    copy.mkdir(parents=True, exist_ok=True)
    for entry in folder.iterdir():
        if entry.name != "database" and not (copy / entry.name).exists():
            (copy / entry.name).symlink_to(entry)
    return copy


_ENVELOPE = re.compile(r"^From \S+(?: at \S+)?\s+(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})$")


def volume_name(day, period):
    """Pipermail's name of the volume of ``day`` (a date) in an archive of ``period``."""
    if period == "year":
        return f"{day.year}"
    if period == "quarter":
        return f"{day.year}q{(day.month - 1) // 3 + 1}"
    if period == "week":
        return f"Week-of-Mon-{day - timedelta(days=day.weekday()):%Y%m%d}"
    if period == "day":
        return f"{day:%Y%m%d}"
    return day.strftime("%Y-%B")


def refiled_copy(folder, work, period):
    """The folder filed again by ``period``: volume files, volume folders of page links, the rest linked."""
    copy = work / f"by-{period}" / folder.name
    if copy.exists():
        return copy
    copy.mkdir(parents=True)
    volumes = {}
    for month_file in pipermail_months(folder):
        volume = None
        opener = gzip.open if month_file.endswith(".gz") else open
        with opener(month_file, "rb") as f:
            previous_blank = True
            for line in f:
                match = _ENVELOPE.match(line.decode("latin-1").rstrip("\n")) if previous_blank else None
                if match is not None:
                    day = datetime.strptime(" ".join(match.group(1).split()), "%a %b %d %H:%M:%S %Y").date()
                    volume = volume_name(day, period)
                if volume is not None:
                    volumes.setdefault(volume, []).append(line)
                previous_blank = line.strip() == b""
    for volume, lines in volumes.items():
        (copy / f"{volume}.txt").write_bytes(b"".join(lines))
    for number, page in read_folder(folder).items():
        source = folder / page.volume / f"{number:06d}.html"
        if page.local_time is None or not source.exists():
            continue
        target = copy / volume_name(page.local_time.date(), period)
        target.mkdir(exist_ok=True)
        (target / source.name).symlink_to(source)
    for name in ("attachments", "database"):
        if (folder / name).exists():
            (copy / name).symlink_to(folder / name)
    return copy


def import_folder(folder, address, work, label):
    storage = work / label
    storage.mkdir(parents=True, exist_ok=True)
    config = write_config(storage)
    if (storage / "var" / "Data.fs").exists():
        os.remove(storage / "var" / "Data.fs")
    started = time.perf_counter()
    result = subprocess.run([str(VENV_BIN / "kittypyr"), "import", str(config), address, str(folder),
                             "--quiet", "--policy", "public"], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"kittypyr import failed:\n{result.stdout}\n{result.stderr}")
    return storage, elapsed, result.stdout.strip().splitlines()


def shows(page, message):
    """Whether ``message`` shows the page's subject, author and (within a day) date."""
    if subject_key(page.subject) != subject_key(message.subject):
        return False
    author = person_key(page.author) or person_key(page.email)
    if author not in {person_key(message.sender_name), person_key(message.sender_address)}:
        return False
    if page.timestamp is None:
        return False
    return abs(message.date.timestamp() - page.timestamp) <= timedelta(days=1).total_seconds()


def judge(storage, address, truth, name):
    """Counter of outcomes and examples of each failure."""
    app = main({}, **{"zodbconn.uri": f"file://{storage}/var/Data.fs?blobstorage_dir={storage}/var/blobs",
                      "kittypyr.base_url": "http://localhost/"})
    browser = TestApp(app)
    outcomes = Counter()
    examples = {}
    prefix = f"http://localhost/list/{address}/message/"
    try:
        with prepare(registry=app.registry) as env:
            messages = env["root"].lists[address].messages
            by_id = {}
            for message in messages.values():
                by_id.setdefault(normalize_message_id(message.original_message_id), []).append(message)
            for number, page in sorted(truth.items()):
                response = browser.get(f"/pipermail/{name}/{page.volume}/{number:06d}.html", expect_errors=True)
                if response.status_int != 301:
                    outcome = f"answers {response.status_int}"
                else:
                    location = response.headers["Location"]
                    target = messages.data.get(location[len(prefix):].strip("/")) \
                        if location.startswith(prefix) else None
                    if target is None:
                        outcome = "redirects to no message"
                    elif page.message_id:
                        same = by_id.get(page.message_id, [])
                        nearest = min(same, key=lambda m: abs(m.date.timestamp() - (page.timestamp or 0)),
                                      default=None)
                        outcome = "right" if target is nearest else "wrong message (by its article record)"
                    else:
                        outcome = ("right" if shows(page, target)
                                   else "wrong message (no article record: by subject, author and date)")
                outcomes[outcome] += 1
                if outcome != "right":
                    examples.setdefault(outcome, []).append(f"{number:06d} {page.subject[:60]!r}")
    finally:
        app.registry._zodb_databases[""].close()
    return outcomes, examples


def judge_attachments(storage, folder, truth, name):
    """Counter of what each attachment link of the pages leads to, and examples of the failures."""
    app = main({}, **{"zodbconn.uri": f"file://{storage}/var/Data.fs?blobstorage_dir={storage}/var/blobs",
                      "kittypyr.base_url": "http://localhost/"})
    browser = TestApp(app)
    outcomes = Counter()
    examples = {}
    links = sorted({path for page in truth.values() for path in page.attachments})
    try:
        for path in links:
            response = browser.get(f"/pipermail/{name}/attachments/{path}", expect_errors=True)
            if response.status_int != 301:
                outcome = f"answers {response.status_int}"
            else:
                location = response.headers["Location"]
                if "/attachment/" not in location:
                    outcome = "leads to the message only"
                else:
                    target = browser.get(location, expect_errors=True)
                    file = folder / "attachments" / path
                    same = file.is_file() and target.status_int == 200 and target.body == file.read_bytes()
                    outcome = "right" if same else f"attachment answers {target.status_int}, other bytes"
            outcomes[outcome] += 1
            if outcome != "right":
                examples.setdefault(outcome, []).append(path)
    finally:
        app.registry._zodb_databases[""].close()
    return len(links), outcomes, examples


def main_():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("--list", dest="address", default=None, help="default: <folder name>@lists.example.org")
    parser.add_argument("--work", default=None, help="where to extract and store (default: a new temporary folder)")
    parser.add_argument("--variant", choices=("both", "as-is", "pages-only"), default="both")
    parser.add_argument("--period", choices=("month", "year", "quarter", "week", "day"), default="month")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="kittypyr-pipermail-"))
    work.mkdir(parents=True, exist_ok=True)
    folder = find_folder(args.source, work)
    if args.period != "month":
        folder = refiled_copy(folder, work, args.period)
        print(f"filed by {args.period}: {len(pipermail_months(folder))} volume files")
    name = folder.name
    address = args.address or f"{name}@lists.example.org"
    truth = read_folder(folder)
    records = sum(1 for page in truth.values() if page.message_id)
    print(f"{folder}: {len(truth)} per-message pages, {records} with an article record in database/")
    variants = {"as-is": folder, "pages-only": None}
    chosen = ("as-is", "pages-only") if args.variant == "both" else (args.variant,)
    for label in chosen:
        source = variants[label] or pages_only_copy(folder, work)
        storage, elapsed, summary = import_folder(source, address, work, label)
        print(f"\n== {label}: imported in {elapsed:.1f} s")
        for line in summary:
            if line.startswith(("read ", "pipermail ", "unmapped ", "attachments ")):
                print(f"   {line}")
        outcomes, examples = judge(storage, address, truth, name)
        right = outcomes["right"]
        print(f"   right: {right} of {len(truth)} pages = {100 * right / len(truth):.2f}%")
        for outcome, count in outcomes.most_common():
            if outcome == "right":
                continue
            print(f"   {outcome}: {count}")
            for example in examples[outcome][:8]:
                print(f"      {example}")
        links, outcomes, examples = judge_attachments(storage, source, truth, name)
        right = outcomes["right"]
        print(f"   attachment links of the pages: {links}, leading to the attachment with the file's bytes: "
              f"{right}" + (f" = {100 * right / links:.2f}%" if links else ""))
        for outcome, count in outcomes.most_common():
            if outcome != "right":
                print(f"   {outcome}: {count}")
                for example in examples[outcome][:8]:
                    print(f"      {example}")
    print(f"\n(work folder: {work})")


if __name__ == "__main__":
    main_()
