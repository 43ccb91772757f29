"""The ``kittypyr`` commands that keep an archive healthy: ``check``, ``backup``, ``restore`` and ``quarantine``."""

import argparse
import re
import sys
from datetime import datetime
from pathlib import Path

import transaction
from zc.lockfile import LockError

from kittypyr.wording import counted

STORAGE_IN_USE = ("the storage is in use by another process: stop the web server first "
                  "(or serve from ZEO)")
# How much of a held mail's reason one line of the listing shows.
REASON_SHOWN = 160


def _opened(config, command):
    """The archive of ``config``, opened; None, said on stderr, when another process holds its storage."""
    from kittypyr.cli import _environment

    try:
        return _environment(config)
    except LockError:
        print(f"kittypyr {command}: {STORAGE_IN_USE}", file=sys.stderr)
        return None


def command_check(args):
    from kittypyr.health import UNREPAIRABLE, check_archive

    opened = _opened(args.config, "check")
    if opened is None:
        return 2
    with opened as env:
        # An upgrade made while opening is kept whatever the check finds.
        transaction.manager.commit()
        if env["root"].reindex_unfinished:
            # Its catalog holds part of the archive: thousands of findings,
            # which the reindex, not a repair, mends.
            print(f"kittypyr check: a reindex was interrupted, and the catalog holds only part of the archive:"
                  f" run kittypyr reindex {args.config} to its end, then check", file=sys.stderr)
            return 1
        findings, counts = check_archive(env["root"], env["registry"], repair=args.repair)
        for finding in findings:
            print(finding)
        if args.repair:
            transaction.manager.commit()
        else:
            transaction.manager.abort()
    checked = (f"{counted(counts['lists'], 'list')}, {counted(counts['messages'], 'message')}, "
               f"{counted(counts['threads'], 'thread')} checked")
    if not findings:
        print(f"{checked}: everything agrees")
        return 0
    beyond_repair = [finding for finding in findings if finding.part in UNREPAIRABLE]
    mendable = len(findings) - len(beyond_repair)
    said = []
    if mendable:
        said.append(f"{counted(mendable, 'problem')} found and repaired" if args.repair else
                    f"{counted(mendable, 'problem')} found; `kittypyr check {args.config} --repair` mends them")
    if beyond_repair:
        said.append(f"{counted(len(beyond_repair), 'problem')} found that no repair mends")
    print(f"{checked}: {'; '.join(said)}")
    return 0 if args.repair and not beyond_repair else 1


def command_quarantine(args):
    """List the mail the archive could not read; save, try again or drop it."""
    opened = _opened(args.config, "quarantine")
    if opened is None:
        return 2
    with opened as env:
        quarantine = env["root"].quarantine
        numbers = [_held_number(quarantine, given) for given in args.drop]
        unknown = [given for given, number in zip(args.drop, numbers) if number is None]
        if unknown:
            print(f"kittypyr quarantine: {', '.join(unknown)} is not held: nothing dropped", file=sys.stderr)
            return 1
        if args.save:
            try:
                _save_held(quarantine, Path(args.save))
            except OSError as exc:
                # Before anything is tried again or dropped: what was asked to be kept is not kept yet.
                print(f"kittypyr quarantine: cannot save into {args.save} ({exc.strerror}): "
                      "give a folder this user can write to; nothing was dropped", file=sys.stderr)
                return 2
        # Dropped first: what is dropped is not tried again.
        for number in numbers:
            quarantine.remove(number)
            print(f"dropped {number}")
        if args.retry:
            _retry_held(env["root"], env["registry"])
        transaction.manager.commit()
        _list_held(quarantine)
    return 0


def _held_number(quarantine, given):
    """The number ``given`` names in ``quarantine`` as listed (000012), or without its zeros (12); None if none."""
    if given in quarantine:
        return given
    if given.isascii() and given.isdigit():
        padded = f"{int(given):06d}"
        if padded in quarantine:
            return padded
    return None


def _one_line(text, most=REASON_SHOWN):
    """``text`` as one line of printable characters, the others escaped, cut at ``most``.

    A reason may quote the unreadable mail itself: its control characters
    would break the listing's lines or act on the terminal.
    """
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:most])
    return shown + ("…" if len(text) > most else "")


def _list_held(quarantine):
    if not len(quarantine):
        print("nothing is held")
    for number, held in quarantine.items():
        print(f"{number}  {held.list_address}  {held.received:%Y-%m-%d %H:%M} UTC  "
              f"{held.size} bytes  {_one_line(held.reason)}")


def _save_held(quarantine, folder):
    folder.mkdir(parents=True, exist_ok=True)
    for number, held in quarantine.items():
        (folder / f"{number}.eml").write_bytes(held.raw_bytes())
    print(f"saved {len(quarantine)} held mails in {folder}")


def _retry_held(archive, registry):
    """Read each held mail again, as this release reads mail: what it reads now is archived."""
    from kittypyr.archiving import store_parsed
    from kittypyr.cli import prepare_list
    from kittypyr.mail import UnparseableMessage, parse_message

    quarantine = archive.quarantine
    for number, held in list(quarantine.items()):
        try:
            parsed = parse_message(held.raw_bytes())
        except UnparseableMessage as exc:
            print(f"{number}: still unreadable ({exc})")
            continue
        prepare_list(archive, registry, held.list_address)
        mailing_list = archive.lists[held.list_address]
        if mailing_list.archives_no_more:
            print(f"{number}: kept: {held.list_address} archives no more (Mailman's policy never)")
            continue
        result = store_parsed(mailing_list, parsed, registry, by_mailman=True)  # held from Mailman's archiver
        quarantine.remove(number)
        print(f"{number}: {result.outcome} as {parsed.message_id or 'an empty Message-ID'}")


def _file_storage(config):
    from kittypyr.backup import file_storage_of
    from kittypyr.configfile import app_settings

    return file_storage_of(app_settings(config)["zodbconn.uri"])


def command_backup(args):
    from kittypyr.backup import BackupRefused, backup

    try:
        paths = _file_storage(args.config)
        kind, copied = backup(paths, args.folder, full=args.full)
    except BackupRefused as refused:
        print(f"kittypyr backup: {refused}", file=sys.stderr)
        return 2
    if kind == "no new":
        print(f"nothing committed to {paths.data_fs} since the last backup in {args.folder}: {copied} new blob files")
    else:
        print(f"{kind} backup of {paths.data_fs} in {args.folder}: {copied} new blob files")
    return 0


def command_restore(args):
    from kittypyr.backup import BackupRefused, restore

    try:
        paths = _file_storage(args.config)
        restored = restore(paths, args.folder, date=args.date)
    except BackupRefused as refused:
        print(f"kittypyr restore: {refused}", file=sys.stderr)
        return 2
    print(f"restored {paths.data_fs} from {args.folder}" + (f" as of {args.date}" if args.date else "")
          + f", with {restored} blob files")
    return 0


def backup_date(text):
    """``restore --date``: a UTC time as ``yyyy-mm-dd[-hh[-mm[-ss]]]``, checked.

    repozo compares it with its file names as text, so anything else (a
    date without leading zeros, a word) would pick some backup silently.
    """
    try:
        if not re.fullmatch(r"\d{4}(-\d\d){2,5}", text):
            raise ValueError(text)
        datetime(*map(int, text.split("-")))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no date: give a UTC time as yyyy-mm-dd[-hh[-mm[-ss]]], such as 2024-05-01-12")
    return text


def add_commands(commands):
    """Add ``check`` (and the backup commands) to the ``kittypyr`` command's subparsers."""
    p = commands.add_parser("check", help="verify the catalog, threads, aggregates and tombstones "
                                          "against the messages")
    p.add_argument("config")
    p.add_argument("--repair", action="store_true", help="mend what disagrees (no full reindex)")
    p.set_defaults(func=command_check)

    p = commands.add_parser("quarantine", help="list the mail the archive could not read; "
                                               "save it, try it again or drop it")
    p.add_argument("config")
    p.add_argument("--save", metavar="FOLDER", help="write each held mail to FOLDER/NUMBER.eml")
    p.add_argument("--retry", action="store_true",
                   help="read each held mail again: what this release can read is archived")
    p.add_argument("--drop", nargs="+", default=[], metavar="NUMBER", help="remove these held mails")
    p.set_defaults(func=command_quarantine)

    p = commands.add_parser("backup", help="back up the embedded storage and its blobs (incremental)")
    p.add_argument("config")
    p.add_argument("folder", help="the backup folder (made if missing); back up into the same one each time")
    p.add_argument("--full", action="store_true", help="a full backup, not an increment")
    # A backup only reads the storage, and a restore makes it: neither opens it.
    p.set_defaults(func=command_backup, opens_storage=False)

    p = commands.add_parser("restore", help="restore the storage CONFIG names from a backup folder")
    p.add_argument("config")
    p.add_argument("folder")
    p.add_argument("--date", type=backup_date, help="the state as of this UTC time, yyyy-mm-dd[-hh[-mm[-ss]]] (default: the latest)")
    p.set_defaults(func=command_restore, opens_storage=False)
