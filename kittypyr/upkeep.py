"""The ``kittypyr`` commands that keep an archive healthy: ``check``, ``backup`` and ``restore``."""

import sys

import transaction
from pyramid.paster import bootstrap, setup_logging
from zc.lockfile import LockError

STORAGE_IN_USE = ("the storage is in use by another process: stop the web server first "
                  "(or serve from ZEO)")


def command_check(args):
    from kittypyr.health import check_archive

    setup_logging(args.config)
    try:
        env = bootstrap(args.config)
    except LockError:
        print(STORAGE_IN_USE, file=sys.stderr)
        return 2
    with env:
        # An upgrade made while opening is kept whatever the check finds.
        transaction.manager.commit()
        findings, counts = check_archive(env["root"], env["registry"], repair=args.repair)
        for finding in findings:
            print(finding)
        if args.repair:
            transaction.manager.commit()
        else:
            transaction.manager.abort()
    checked = (f"{counts['lists']} lists, {counts['messages']} messages, "
               f"{counts['threads']} threads checked")
    if not findings:
        print(f"{checked}: everything agrees")
        return 0
    if args.repair:
        print(f"{checked}: {len(findings)} problems found and repaired")
        return 0
    print(f"{checked}: {len(findings)} problems found; `kittypyr check {args.config} --repair` mends them")
    return 1


def add_commands(commands):
    """Add ``check`` (and the backup commands) to the ``kittypyr`` command's subparsers."""
    p = commands.add_parser("check", help="verify the catalog, threads, aggregates and tombstones "
                                          "against the messages")
    p.add_argument("config")
    p.add_argument("--repair", action="store_true", help="mend what disagrees (no full reindex)")
    p.set_defaults(func=command_check)
