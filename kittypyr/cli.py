"""The ``kittypyr`` command: ``kittypyr COMMAND CONFIG ...``.

Each command loads the application from CONFIG (an .ini file, as for
``pserve``), so it sees the same storage, settings and extensions.
"""

import argparse
import configparser
import contextlib
import errno
import json
import logging
import math
import os
import signal
import sys
from pathlib import Path
from urllib.parse import urlsplit

import transaction
from plaster.exceptions import PlasterError
from pyramid_zodbconn import get_connection
from repoze.catalog.query import Eq
from zc.lockfile import LockError
from ZODB.POSException import ConflictError

import kittypyr
from kittypyr import StorageInUse, storage_unwritable, upkeep
from kittypyr.hyperkitty import command as hyperkitty_command
from kittypyr.catalog import reindex_archive, search
from kittypyr.configfile import app_settings, bootstrap, setup_logging
from kittypyr.importing import DEFAULT_BATCH
from kittypyr.packing import note_packed, pack_storage
from kittypyr.people import rebuild_people
from kittypyr.stats import rebuild_activity
from kittypyr.votes import rebuild_totals
from kittypyr.wording import counted


def _environment(config_uri):
    setup_logging(config_uri)
    # zc.lockfile logs a busy storage itself, as an error line of its own;
    # main() explains it in one line instead.
    logging.getLogger("zc.lockfile").setLevel(logging.CRITICAL)
    # Its warnings are about the web server's sessions and requests, which
    # a command has none of (such as a missing kittypyr.secret).
    logging.getLogger("kittypyr.security").setLevel(logging.ERROR)
    # That no Mailman core is configured is news for the web server's log, not
    # for each command (whose summaries say what it means for them).
    logging.getLogger("kittypyr.standalone").setLevel(logging.WARNING)
    try:
        env = bootstrap(config_uri)
    except StorageInUse:
        # The application says it to a server; each command says it its way.
        raise LockError(config_uri) from None
    return _closing_storage(env)


@contextlib.contextmanager
def _closing_storage(env):
    """``env`` as a context, whose storage is closed when it ends, not left to the end of the process.

    A FileStorage writes its index (``Data.fs.index``) only when closed:
    without it, the next command or server to open the storage reads the
    whole ``Data.fs`` again to rebuild it, and logs "Ignoring index".
    """
    try:
        with env:
            yield env
    finally:
        unsaved = _IndexNotSaved()
        storage_log = logging.getLogger("ZODB.FileStorage")
        storage_log.addFilter(unsaved)
        try:
            for database in getattr(env["registry"], "_zodb_databases", {}).values():  # pyramid_zodbconn's
                database.close()
        finally:
            storage_log.removeFilter(unsaved)
        if unsaved.error is not None:
            print(f"kittypyr: the storage's index could not be saved ({unsaved.error}): the next start "
                  "rebuilds it from Data.fs, which takes longer", file=sys.stderr)


class _IndexNotSaved(logging.Filter):
    """FileStorage's traceback when it cannot save its index as it closes (a full disk), kept as one line."""

    error = None

    def filter(self, record):
        if record.getMessage().startswith("Error saving index") and record.exc_info:
            error = record.exc_info[1]
            self.error = getattr(error, "strerror", None) or error
            return False
        return True


def config_problem(config):
    """Why ``config`` cannot be the .ini file a command runs with, said with what to do; None when it can."""
    # The file, without the '#section' pserve also takes (development.ini#main).
    path = config.split("#", 1)[0] or config
    if not os.path.isfile(path):
        what = f"{path} is a folder, not a configuration file" if os.path.isdir(path) else \
            f"there is no configuration file {path}"
        return f"{what}: give the .ini file the web server runs with (such as development.ini or production.ini)"
    try:
        settings = app_settings(config)
    except (PlasterError, configparser.Error, LookupError):
        # PlasterError: no loader for the file's kind (not an .ini); configparser.Error:
        # not in .ini syntax; LookupError: no [app:main] section.
        return (f"{config} is not a kittypyr configuration: give an .ini file with an [app:main] section "
                "that says use = egg:kittypyr (such as development.ini)")
    if not settings.get("zodbconn.uri", "").strip():
        return f"{config} names no storage: set zodbconn.uri in its [app:main] section (see development.ini)"
    return None


def _storage_schemes():
    """What zodbconn.uri may start with: the schemes of the storages installed (zodburi's resolvers)."""
    from importlib.metadata import entry_points

    return {entry.name for entry in entry_points(group="zodburi.resolvers")}


def storage_problem(config, creates_storage=True):
    """Why the embedded storage ``config`` names cannot be opened, said with what to do; None when it can.

    Only a ``file://`` storage is looked at: its folder must exist and be
    writable, since opening it takes a lock file there and may upgrade it.
    ``creates_storage``: whether the command may make the archive (an
    import may); one that works on an archive asks for one.
    """
    from kittypyr.backup import blobs_without_storage, file_storage_of

    uri = app_settings(config)["zodbconn.uri"].strip()
    scheme = urlsplit(uri).scheme
    if scheme not in _storage_schemes():
        return (f"zodbconn.uri in {config} names no storage kittypyr can open ({uri!r}): correct zodbconn.uri,"
                " which starts with file://, zeo:// or postgres:// (README: 'Storage: one process or many')")
    if scheme != "file":
        return None
    paths = file_storage_of(uri)
    folder = paths.data_fs.parent
    for path in [*reversed(folder.parents), folder]:
        if path.exists() and not path.is_dir():
            return (f"{path} is a file, where zodbconn.uri in {config} wants a folder: move it away or correct"
                    " zodbconn.uri")
    if not folder.is_dir():
        return (f"the storage folder {folder} does not exist: create it (mkdir -p {folder}) "
                f"or correct zodbconn.uri in {config}")
    for path in (paths.data_fs, paths.data_fs.with_name(paths.data_fs.name + ".lock"), paths.blob_dir):
        if path is not None and path.exists() and path.is_dir() != (path == paths.blob_dir):
            kind = "a folder" if path.is_dir() else "a file"
            return (f"{path} is {kind}, where zodbconn.uri in {config} wants "
                    f"{'a file' if path.is_dir() else 'a folder'}: move it away or correct zodbconn.uri")
    for path in (folder, paths.data_fs, paths.blob_dir):
        if path is not None and path.exists() and not os.access(path, os.W_OK):
            return (f"{path} is not writable for this user: run the command as the user the web server "
                    "runs as, or give this user write access to it")
    orphaned = blobs_without_storage(uri)
    if orphaned is not None:
        return orphaned
    if not creates_storage and not paths.data_fs.exists():
        return (f"there is no archive at {paths.data_fs}: correct zodbconn.uri in {config}, or make the archive "
                "first (kittypyr import, or the web server's first start)")
    return None


def prepare_list(archive, registry, list_address, policy=None, subject_prefix=None):
    """The list an import fills, created with its first policy; returns a line for the summary.

    A new list asks Mailman its policy where Mailman is configured, and is
    private while the answer is unknown; ``policy`` (from ``--policy``) says
    it instead, for a new list or an existing one. ``subject_prefix`` (from
    ``--subject-prefix``): the list's, which the subjects are stored without
    (Mailman's, when it says one later).
    """
    line = _prepared_policy(archive, registry, list_address, policy)
    if subject_prefix is not None:
        archive.lists[list_address].subject_prefix = subject_prefix
        line += f"; subjects stored without {subject_prefix.strip()!r}" if subject_prefix.strip() else ""
    return line


def _prepared_policy(archive, registry, list_address, policy):
    """``prepare_list``'s making of the list and its policy; its line."""
    from kittypyr.mailman import create_list_with_policy, mailman_is_configured

    # A private list's readers log in through Mailman: on a stand-alone archive, nobody.
    unread = ("; nobody can read it until Mailman core is configured (kittypyr.mailman_url)"
              if policy == "private" and not mailman_is_configured(registry) else "")
    mailing_list = archive.lists.get(list_address)
    if mailing_list is None:
        mailing_list, reason, _ = create_list_with_policy(archive, registry, list_address, policy)
        return f"new list {list_address}: {mailing_list.archive_policy}, {reason}{unread}"
    if policy is not None and policy != mailing_list.archive_policy:
        mailing_list.archive_policy = policy
        mailing_list.policy_known = True
        mailing_list.policy_reason = "as given by --policy"
        return f"list {list_address}: now {policy}, as given by --policy{unread}"
    reason = mailing_list.policy_reason
    if reason == "as given by --policy":
        reason = "as an earlier import's --policy gave it"
    return f"list {list_address}: {mailing_list.archive_policy}" + (f", {reason}" if reason else "")


def _commit_prepared_list(env, list_address, policy, subject_prefix=None, attempts=5):
    """Commit ``prepare_list``; returns its line.

    Importers of one new list started at once (one per host, over ZEO or
    RelStorage) all make the list; those that commit after the first
    conflict, and start over to find it made.
    """
    for attempt in range(attempts):
        try:
            line = prepare_list(env["root"], env["registry"], list_address, policy, subject_prefix)
            transaction.manager.commit()
            return line
        except ConflictError:
            transaction.manager.abort()
            if attempt == attempts - 1:
                raise


def _forget_unread_list(env, list_address):
    """Remove the list an import just made and filled with nothing; its line for the summary, or None.

    A mistyped path, or a file with no mail in it, would otherwise leave an
    empty list on the archive's index. Another importer that filled the
    list meanwhile (over ZEO or RelStorage) keeps it: the count of its
    messages is read as current, and such a commit conflicts.
    """
    mailing_list = env["root"].lists.get(list_address)
    if mailing_list is None or len(mailing_list.messages) or len(mailing_list.messages.tombstones):
        return None
    mailing_list._p_jar.readCurrent(mailing_list.messages._count)
    env["root"].lists.remove(list_address)
    try:
        transaction.manager.commit()
    except ConflictError:
        transaction.manager.abort()
        return None
    return f"no list made: nothing was read for {list_address}"


def _list_address(command, value):
    """``value`` as a list's posting address; None, said on stderr, if it is not one."""
    from kittypyr.addresses import normalize_list_address

    list_address = normalize_list_address(value)
    if list_address is None:
        print(f"kittypyr {command}: {value!r} is not a list's posting address (such as dev@lists.example.org)",
              file=sys.stderr)
    return list_address


def import_cache_size(env, command, config):
    """The kittypyr.import_cache_size_bytes setting in bytes; None, said on stderr, when it is not a size."""
    from kittypyr.importing import DEFAULT_IMPORT_CACHE_BYTES, byte_size

    setting = env["registry"].settings.get("kittypyr.import_cache_size_bytes")
    if setting is None or not str(setting).strip():
        return DEFAULT_IMPORT_CACHE_BYTES
    try:
        return byte_size(setting)
    except ValueError as exc:
        print(f"kittypyr {command}: kittypyr.import_cache_size_bytes in {config}: {exc}", file=sys.stderr)
        return None


# Failures, doubtful splits and skipped messages of one kind in one file
# named on the screen: a damaged file can hold a doubt on every line.
LISTED_ON_SCREEN = 20


def command_import(args):
    from kittypyr.importing import import_mail

    list_address = _list_address("import", args.list_address)
    if list_address is None:
        return 2
    with _environment(args.config) as env:
        cache_size_bytes = import_cache_size(env, "import", args.config)
        if cache_size_bytes is None:
            return 2
        policy_line = _commit_prepared_list(env, list_address, args.policy, args.subject_prefix)
        try:
            report = import_mail(
                env["root"],
                list_address,
                args.paths,
                transaction.manager,
                batch_size=args.batch_size,
                workers=args.workers,
                progress=not args.quiet,
                cache_size_bytes=cache_size_bytes,
            )
        except KeyboardInterrupt:
            if policy_line.startswith("new list"):
                # Interrupted before its first batch was stored: no empty list is left on the site.
                transaction.manager.abort()
                _forget_unread_list(env, list_address)
            raise
        if policy_line.startswith("new list") and not report.total("read"):
            policy_line = _forget_unread_list(env, list_address) or policy_line
    written = print_summary(report.summary, args.report, [policy_line])
    return 0 if report.ok and written else 1


def print_summary(summary, report_path=None, last_lines=()):
    """Print ``summary(listed=LISTED_ON_SCREEN)``, then ``last_lines``; write them whole to ``report_path`` if given.

    ``summary(listed=None)`` names every one of each kind; the screen
    names the first LISTED_ON_SCREEN and says where the rest are.
    """
    every = summary()
    unwritten = None
    if report_path:
        try:
            Path(report_path).write_text("\n".join([*every, *last_lines, ""]))
        except OSError as exc:
            # After the work is done: its summary is still shown, whole.
            unwritten, report_path = f"the report could not be written to {report_path}: {_first_cause(exc)}", None
    shown = every if unwritten else summary(listed=LISTED_ON_SCREEN)
    for line in shown:
        print(line)
    if shown != every:
        print(f"every one is named in {report_path}" if report_path else
              f"only the first {LISTED_ON_SCREEN} of each kind are named here: --report FILE names every one")
    for line in last_lines:
        print(line)
    if unwritten:
        print(unwritten, file=sys.stderr)
    return unwritten is None


def _at_least(least):
    """An argument type: a whole number, ``least`` or more."""
    def whole(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        return value

    return whole


def _days(text):
    """An argument type: a number of days, 0 or more (history further back than 1970 is all of it)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} is not a number of days from 0 up")
    return value


def command_remove_list(args):
    from kittypyr.resources.admin import AuditEntry
    from kittypyr.standalone import mailman_url

    list_address = _list_address("remove-list", args.list_address)
    if list_address is None:
        return 2
    with _environment(args.config) as env:
        archive = env["root"]
        mailing_list = archive.lists.get(list_address)
        if mailing_list is None:
            known = sorted(archive.lists.keys())
            shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
            print(f"kittypyr remove-list: there is no list {list_address} in this archive"
                  f" ({'its lists: ' + shown if known else 'it has no list'})", file=sys.stderr)
            return 2
        held = f"{counted(len(mailing_list.messages), 'message')} in {counted(len(mailing_list.threads), 'thread')}"
        quarantined = [number for number, mail in archive.quarantine.items() if mail.list_address == list_address]
        if quarantined:
            # Tried again, it would make the list anew.
            held += f", and {counted(len(quarantined), 'message')} held in the quarantine"
        if not args.yes:
            print(f"{list_address} holds {held}; nothing removed. To remove the list and all its mail from the "
                  f"archive, run again with --yes (`kittypyr backup` keeps a copy first).")
            return 1
        # Its messages and threads leave the catalog, the people's counts
        # and the votes as the list goes (the removal's subscribers).
        archive.lists.remove(list_address)
        for number in quarantined:
            archive.quarantine.remove(number)
        archive.audit_log.add(AuditEntry("remove-list", "kittypyr remove-list", None, (list_address,),
                                         f"Removed the list with its {held}", reason=args.reason or ""))
        transaction.manager.commit()
        archived_by_mailman = bool(mailman_url(env["registry"]))
    print(f"removed {list_address}: {held}; `kittypyr pack {args.config}` frees the space they took")
    if archived_by_mailman:
        print("if Mailman core still has this list and archives to kittypyr, its next post makes it again")
    return 0


def command_reindex(args):
    from kittypyr.catalog import catalogued_count, reindex_cjk_words

    if args.cjk:
        with _environment(args.config) as env:
            count = reindex_cjk_words(env["root"], commit=transaction.manager.commit)
        print(f"indexed again {counted(count, 'message')}")
        return 0
    bar = None
    with _environment(args.config) as env:
        if sys.stderr.isatty():
            from kittypyr.progress import progress_bar

            # Minutes on a large archive: shown as the import shows its own.
            bar = progress_bar("reindex", catalogued_count(env["root"]), unit="item")
        try:
            count = reindex_archive(env["root"], env["registry"], commit=transaction.manager.commit,
                                    progress=None if bar is None else bar.update, finish=False)
        finally:
            if bar is not None:
                bar.close()
        for mailing_list in env["root"].lists.values():
            rebuild_activity(mailing_list)
            transaction.manager.commit()
        rebuild_people(env["root"])
        rebuild_totals(env["root"])
        env["root"].reindex_unfinished = False
        transaction.manager.commit()
    print(f"indexed {counted(count, 'message and thread', 'messages and threads')}")
    return 0


def _first_cause(exc):
    """The failure at the bottom of ``exc``'s chain, in a few words: "Connection refused", "HTTP 401 ..."."""
    while (exc.__cause__ or exc.__context__) is not None:
        exc = exc.__cause__ or exc.__context__
    if isinstance(getattr(exc, "code", None), int):  # an HTTP error answer, such as 401 for a wrong password
        return f"HTTP {exc.code} {getattr(exc, 'reason', '') or ''}".strip()
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def command_sync(args):
    from kittypyr.mailman import MailmanUnavailable, sync_lists
    from kittypyr.standalone import mailman_url

    with _environment(args.config) as env:
        url = mailman_url(env["registry"])
        if not url:
            print(f"kittypyr sync: no Mailman core is configured: set kittypyr.mailman_url, kittypyr.mailman_user "
                  f"and kittypyr.mailman_password in {args.config} (a stand-alone archive has nothing to sync)",
                  file=sys.stderr)
            return 2
        try:
            created, updated = sync_lists(env["root"], env["registry"])
        except MailmanUnavailable as exc:
            transaction.manager.abort()
            print(f"kittypyr sync: Mailman core at {url} gave no lists ({_first_cause(exc)}): check that it runs "
                  f"and that kittypyr.mailman_url, kittypyr.mailman_user and kittypyr.mailman_password in "
                  f"{args.config} are right", file=sys.stderr)
            return 1
        transaction.manager.commit()
    for address in created:
        print(f"created {address}")
    print(f"{counted(len(created), 'list')} created, {len(updated)} updated from Mailman")
    return 0


def command_pack(args):
    try:
        with _environment(args.config) as env:
            archive = env["root"]
            last_pack = archive.packed_at
            # An upgrade made while opening is kept, not packed away.
            note_packed(archive)
            transaction.manager.commit()
            db = get_connection(env["request"]).db()
            try:
                before, after = pack_storage(db, args.days)
            except BaseException:
                # A pack that failed is no pack: the web server's schedule
                # (kittypyr.pack_every_days) counts from the last that was.
                _note_pack_failed(archive, last_pack)
                raise
        db.close()
    except LockError:
        advice = "stop the web server first"
        if app_settings(args.config).get("kittypyr.mailman_url", "").strip():
            # Site administrators log in through Mailman: a stand-alone archive has no such page.
            advice += ", or pack from its administration page (/admin/, Pack now), which packs while it serves"
        print(f"kittypyr pack: the storage is in use by another process: {advice}", file=sys.stderr)
        return 2
    print(f"packed: {before:,} bytes before, {after:,} bytes after")
    return 0


def _note_pack_failed(archive, last_pack):
    transaction.manager.abort()
    archive.packed_at = last_pack
    try:
        transaction.manager.commit()
    except Exception:
        # On a full disk, as likely as the pack's failure: kept as it was.
        transaction.manager.abort()


def _date_bound(archive, query, last):
    total, resources = search(archive, query, sort_index="date", limit=1, reverse=last)
    for message in resources:
        return message.date.isoformat()
    return None


def archive_info(archive, list_address=None):
    """The figures ``kittypyr info`` prints, as a dict."""
    query = Eq("kind", "message")
    if list_address is None:
        mailing_lists = list(archive.lists.values())
    else:
        mailing_lists = [archive.lists[list_address.lower()]]
        query = query & Eq("list", mailing_lists[0].address)
    info = {
        "messages": sum(m.message_count for m in mailing_lists),
        "threads": sum(m.thread_count for m in mailing_lists),
        "attachments": sum(m.attachment_count() for m in mailing_lists),
        "first_date": _date_bound(archive, query, last=False),
        "last_date": _date_bound(archive, query, last=True),
    }
    if list_address is None:
        info["lists"] = len(mailing_lists)
        info["quarantined"] = len(archive.quarantine)
        info["mailing_lists"] = [m.address for m in mailing_lists]
    else:
        info["list"] = mailing_lists[0].address
        # Left out of the subjects archived (kittypyr.subjects): "" for none.
        info["subject_prefix"] = mailing_lists[0].subject_prefix
    return info


def command_info(args):
    with _environment(args.config) as env:
        try:
            info = archive_info(env["root"], args.list_address)
        except KeyError:
            addresses = sorted(env["root"].lists.keys())
            # A few, to show the form an address takes; `kittypyr info CONFIG` lists them all.
            known = ", ".join(addresses[:5]) + (f" and {len(addresses) - 5} more" if len(addresses) > 5 else "")
            known = known or "none yet"
            print(f"kittypyr info: no archived list {args.list_address!r}: give a list's posting address "
                  f"(archived here: {known})", file=sys.stderr)
            return 2
        if env["root"].reindex_unfinished:
            info["reindex"] = (f"unfinished (interrupted?): the catalog holds only part of the archive, which"
                               f" answers 503 until kittypyr reindex {args.config} is run to its end")
        elif env["root"].text_indexed_before_cjk_split:
            info["reindex"] = (f"kittypyr reindex {args.config} --cjk, to find words inside the Chinese, "
                               "Japanese and Korean mail archived before they were split")
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        for key, value in info.items():
            if isinstance(value, (list, tuple)):
                value = ", ".join(map(str, value)) or "none"
            elif key == "subject_prefix":
                value = repr(value) if value else None  # its spaces are part of it
            print(f"{key}: {'none' if value is None else value}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kittypyr", description="Import, index, check, back up and pack the archive that CONFIG (the .ini file "
                                     "the web server runs with) names: kittypyr COMMAND CONFIG ...")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("import", help="import mbox, Maildir or Pipermail files into a list")
    p.add_argument("config")
    p.add_argument("list_address", help="the list's posting address, e.g. dev@lists.example.org")
    p.add_argument("paths", nargs="+", help="mbox (.gz, .bz2, .xz), Maildir folders, Pipermail YYYY-Month.txt(.gz)")
    p.add_argument("--batch-size", type=_at_least(1), default=DEFAULT_BATCH, help="messages per commit")
    p.add_argument("--workers", type=_at_least(0), default=None, help="parser processes (0: parse inline)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--policy", choices=("public", "private"), default=None,
                   help="the list's archive policy (default: Mailman's; private while Mailman "
                        "cannot say; public without Mailman configured)")
    p.add_argument("--report", default=None, metavar="FILE",
                   help=f"write the summary to FILE too, naming every failed message and doubtful split "
                        f"(on the screen: the first {LISTED_ON_SCREEN} of each kind in each file)")
    p.add_argument("--subject-prefix", default=None, metavar="PREFIX",
                   help="what the list put before every subject, e.g. '[Dev] ', left out of the subjects "
                        "stored (default: Mailman's, as it last said; '' for none)")
    p.set_defaults(func=command_import, creates_storage=True)

    p = commands.add_parser("reindex",
                            help="rebuild the catalog, lists' statistics, senders' counts and vote totals")
    p.add_argument("config")
    p.add_argument("--cjk", action="store_true",
                   help="after an upgrade: index again, in the text indexes only, the mail whose Chinese, "
                        "Japanese or Korean words were indexed before they were split")
    p.set_defaults(func=command_reindex)

    p = commands.add_parser("sync", help="fetch every list's details, owners and moderators from Mailman")
    p.add_argument("config")
    p.set_defaults(func=command_sync, creates_storage=True)

    p = commands.add_parser("pack", help="remove deleted mail and old revisions from the storage files")
    p.add_argument("config")
    p.add_argument("--days", type=_days, default=0, help="keep this many days of history (default: none)")
    p.set_defaults(func=command_pack)

    p = commands.add_parser("remove-list", help="remove a list and all its mail from the archive")
    p.add_argument("config")
    p.add_argument("list_address")
    p.add_argument("--yes", action="store_true", help="remove it (without: say what it holds)")
    p.add_argument("--reason", help="why, for the audit log")
    p.set_defaults(func=command_remove_list)

    p = commands.add_parser("info", help="counts and dates of the archive or one list")
    p.add_argument("config")
    p.add_argument("list_address", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=command_info)

    upkeep.add_commands(commands)
    hyperkitty_command.add_command(commands)
    return parser


class CtrlCBetweenCommits:
    """Ctrl-C during a commit stops the command once the commit is done (a transaction synchronizer).

    Interrupted in the middle of its commit, a FileStorage logs a critical
    failure, with a traceback, and closes itself.
    """

    def __init__(self):
        self.committing = False
        self.pressed = False

    def on_ctrl_c(self, signum, frame):
        if self.committing:
            self.pressed = True
        else:
            raise KeyboardInterrupt

    def beforeCompletion(self, transaction):
        self.committing = True

    def afterCompletion(self, transaction):
        # Called once the storage has written the commit (or the abort) whole.
        self.committing = False
        if self.pressed:
            self.pressed = False
            raise KeyboardInterrupt

    def newTransaction(self, transaction):
        pass


def _print_file_names_as_they_are():
    """Let stdout write file names that are not valid in the locale's encoding.

    Python gives such a name (an old archive's Latin-1 ``café.mbox``) as
    lone surrogates, which a UTF-8 locale's strict stdout refuses: the
    import's summary stopped with a traceback at the first one. They go out
    as the name's own bytes.
    """
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="surrogateescape")


# Writing failed for want of room: a full disk, a quota, a file-size limit,
# a disk remounted read-only.
_STORAGE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def main(argv=None):
    # The application a command opens serves no page (no scheduled pack, for one).
    serving, kittypyr.SERVING = kittypyr.SERVING, False
    try:
        return _run(argv)
    except BrokenPipeError:
        # The reader of the output went away (``kittypyr info … | head``):
        # nothing is wrong. What is still buffered goes nowhere, quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    finally:
        kittypyr.SERVING = serving


class _ToldInOneLine(logging.Filter):
    """Drops a record of an exception the command tells in one line: Ctrl-C, a full or read-only disk."""

    def filter(self, record):
        if not record.exc_info or record.exc_info[0] is None:
            return True
        kind, error = record.exc_info[:2]
        if issubclass(kind, KeyboardInterrupt):
            return False
        return not (issubclass(kind, OSError) and error.errno in _STORAGE_FULL)


# ZODB logs what it was doing when an exception went through it (a pack, a
# record's load), Ctrl-C and a full disk too, with its traceback.
_LOGGING_CTRL_C = ("ZODB.DB", "ZODB.Connection", "ZODB.FileStorage", "ZODB.FileStorage.fspack")


def _quiet_about_ctrl_c():
    for name in _LOGGING_CTRL_C:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, _ToldInOneLine) for existing in logger.filters):
            logger.addFilter(_ToldInOneLine())


def _run(argv):
    args = build_parser().parse_args(argv)
    _quiet_about_ctrl_c()
    _print_file_names_as_they_are()
    problem = config_problem(args.config)
    if problem is None and getattr(args, "opens_storage", True):
        problem = storage_problem(args.config, getattr(args, "creates_storage", False))
    if problem is not None:
        print(f"kittypyr {args.command}: {problem}", file=sys.stderr)
        return 2
    between_commits = CtrlCBetweenCommits()
    transaction.manager.registerSynch(between_commits)
    ctrl_c_before = signal.signal(signal.SIGINT, between_commits.on_ctrl_c)
    try:
        return args.func(args)
    except LockError:
        # The embedded FileStorage takes one process at a time: most often
        # the web server is running.
        print(f"kittypyr {args.command}: the storage is in use by another process (the web server?): "
              "stop it first, or serve from ZEO so that several processes share it (README: Storage)",
              file=sys.stderr)
        return 2
    except OSError as error:
        if error.errno not in _STORAGE_FULL:
            raise
        print(f"kittypyr {args.command}: {storage_unwritable(error)}: what the command had committed is kept; "
              "free space on that disk and run the same command again", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # Ctrl-C: every command commits as it goes, and what it left
        # uncommitted is dropped with the storage's transaction.
        if args.command == "reindex":
            print("kittypyr reindex: interrupted: the catalog holds only part of the archive, which answers 503"
                  " until the same command is run again to its end", file=sys.stderr)
        else:
            print(f"kittypyr {args.command}: interrupted: what it had committed is kept; "
                  "run the same command again to finish", file=sys.stderr)
        return 130  # 128 + SIGINT, as shells report it
    finally:
        signal.signal(signal.SIGINT, ctrl_c_before)
        transaction.manager.unregisterSynch(between_commits)


if __name__ == "__main__":
    sys.exit(main())
