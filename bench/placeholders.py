"""Where a serving process's memory goes: its RSS, the placeholders and the records its caches hold.

    .venv/bin/python bench/placeholders.py DIR... [--requests 3] [--placeholders-max N]

Each DIR is an archive folder (``kittypyr.ini`` and ``var/``), such as
the 1× and 10× archives ``bench/scale.py --data DIR`` leaves in DIR/again
and DIR. The pages are bench/scale.py's, picked once from the first DIR's
list (give the 1× first: bench/scale.py picks them from its first block).
Each archive is opened in a process of its own, as ``pserve``
opens it (an archive made by an older kittypyr is upgraded), and asked
for each page REQUESTS times. After start-up and after each kind of page
it prints the process's RSS, how many placeholders its connection caches
hold (a record not read, that a record read refers to), and the pickled
size of the records they hold, which ``connection_cache_size_bytes``
bounds. At the end, the trees whose nodes hold the most placeholders,
found by walking from the root through what is loaded: nothing is read
for it. A connection keeps at most ``kittypyr.connection_placeholders_max``
placeholders (``kittypyr.placeholders``): ``--placeholders-max 0`` shows
what the pages leave without that bound.
"""

import argparse
import collections
import gc
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import PLACEHOLDERS_SETTING, add_placeholders_option, process_memory_mb  # noqa: E402
from kittypyr.placeholders import placeholders_in  # noqa: E402


def connections_of(app):
    """The connections of the app's database."""
    return list(app.registry._zodb_databases[""].pool.all)


def print_stage(label, app):
    connections = connections_of(app)
    placeholders = sum(placeholders_in(connection) for connection in connections)
    held = sum(connection._cache.total_estimated_size for connection in connections) / 2**20
    print(f"  {label:10} RSS {process_memory_mb('self'):6.1f} MB  placeholders {placeholders:7}  "
          f"records held {held:5.1f} MB", flush=True)


def _is_placeholder(obj):
    return getattr(obj, "_p_changed", False) is None


def _children(obj):
    """(name, child) of a loaded object: a tree node's children, a bucket's values, attributes, items."""
    kind = type(obj).__name__
    if hasattr(obj, "_p_oid") and kind.endswith(("BTree", "TreeSet")):
        state = obj.__getstate__() or ((),)
        return [("", child) for child in state[0][::2]]
    if hasattr(obj, "_p_oid") and kind.endswith(("Bucket", "Set")):
        values = obj.values() if hasattr(obj, "values") else ()
        return [("/*", value) for value in values if hasattr(value, "_p_oid")]
    if isinstance(obj, dict):
        return [(f"[{key!s:.40}]", value) for key, value in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [("", value) for value in obj]
    if hasattr(obj, "__dict__"):
        return [(f".{name}", value) for name, value in vars(obj).items() if name != "__parent__"]
    return []


def placeholders_by_tree(app, most=8):
    """The paths from the root whose loaded nodes hold the most placeholders."""
    root = connections_of(app)[0]._cache.get(b"\0" * 8)
    counts = collections.Counter()
    seen = set()
    stack = [(root, "root")]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float)):
            continue
        seen.add(id(obj))
        if _is_placeholder(obj):
            counts[path] += 1
            continue
        for name, child in _children(obj):
            stack.append((child, path + name))
    return counts.most_common(most)


def measure_one(folder, pages, requests, placeholders_max=None):
    import webtest
    from pyramid.paster import get_appsettings

    from kittypyr import main as make_app

    config = str(folder / "kittypyr.ini")
    settings = get_appsettings(config, "main")
    if placeholders_max is not None:
        settings[PLACEHOLDERS_SETTING] = str(placeholders_max)
    print(f"{folder} ({PLACEHOLDERS_SETTING} {settings.get(PLACEHOLDERS_SETTING) or 'unset'}):", flush=True)
    app = make_app({"__file__": config, "here": str(folder)}, **settings)
    client = webtest.TestApp(app)
    print_stage("started", app)
    for kind, paths in pages.items():
        for path in paths:
            for _ in range(requests):
                client.get(path, status=200)
        gc.collect()
        print_stage(kind, app)
    for path, count in placeholders_by_tree(app):
        print(f"    {count:7}  {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--requests", type=int, default=3)
    add_placeholders_option(parser)
    parser.add_argument("--pages", help=argparse.SUPPRESS)  # the pages, as JSON, for one folder's process
    args = parser.parse_args()
    if args.pages:
        measure_one(args.folders[0].resolve(), json.loads(args.pages), args.requests, args.placeholders_max)
        return
    import scale

    pages = json.dumps(scale.pick_pages(args.folders[0].resolve() / "var"))
    for folder in args.folders:
        bound = [] if args.placeholders_max is None else ["--placeholders-max", str(args.placeholders_max)]
        subprocess.run([sys.executable, __file__, str(folder), "--requests", str(args.requests), "--pages", pages,
                        *bound], check=True)


if __name__ == "__main__":
    main()
