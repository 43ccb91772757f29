"""``kittypyr import-hyperkitty CONFIG DATABASE_URL``."""

import sys

import transaction
from ZODB.POSException import ConflictError

from kittypyr.hyperkitty.database import UnreadableDatabase, open_database
from kittypyr.hyperkitty.migrate import CONFLICT_ATTEMPTS, migrate


def command_import_hyperkitty(args):
    from kittypyr.cli import _environment, import_cache_size, print_summary
    from kittypyr.importing import import_cache

    try:
        connection = open_database(args.database_url)
    except UnreadableDatabase as exc:
        print(f"kittypyr import-hyperkitty: {exc}", file=sys.stderr)
        return 2
    try:
        with _environment(args.config) as env:
            cache_size_bytes = import_cache_size(env, "import-hyperkitty", args.config)
            if cache_size_bytes is None:
                return 2
            with import_cache(env["root"]._p_jar, cache_size_bytes):
                try:
                    report = migrate(env["root"], connection, env["registry"], commit=transaction.manager.commit,
                                     abort=transaction.manager.abort)
                except ConflictError:
                    print(f"kittypyr import-hyperkitty: other writers changed the same records at each of"
                          f" {CONFLICT_ATTEMPTS} attempts at one batch, which is not stored; run it again when"
                          " the archive is quieter: what is already stored is found, not stored twice",
                          file=sys.stderr)
                    return 1
    finally:
        connection.close()
    return 0 if print_summary(report.summary, args.report) else 1


def add_command(commands):
    from kittypyr.cli import LISTED_ON_SCREEN

    p = commands.add_parser("import-hyperkitty",
                            help="import a HyperKitty site: its lists, mail, votes, tags and favourites")
    p.add_argument("config")
    p.add_argument("database_url", help="HyperKitty's SQLite file, or a postgresql:// URL")
    p.add_argument("--report", default=None, metavar="FILE",
                   help="write the summary to FILE too, naming every message, vote and tag skipped "
                        f"(on the screen: the first {LISTED_ON_SCREEN} of each kind)")
    p.set_defaults(func=command_import_hyperkitty, creates_storage=True)
