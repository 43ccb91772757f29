"""Start-up time and first-request latency, without and with ``kittypyr.warm_up``.

    .venv/bin/python bench/startup.py [--data DIR] [--corpus PATH] [--requests N]

Imports the corpus into DIR (skipped when DIR already holds an archive),
then, for each setting, starts ``pserve``, times how long until it listens,
and fetches each kind of page readers fetch: the first request of each
kind, then the median of N more.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.functional import VENV_BIN, free_port, kittypyr, wait_for_port, write_config  # noqa: E402

LIST = "bench@lists.example.org"
KINDS = ("/", "overview", "month", "thread", "message", "search", "api thread")


def pick_paths(config):
    """One path of each kind, chosen as the warm-up chooses them (newest message of the list)."""
    from pyramid.paster import bootstrap

    from kittypyr.warmup import sample_paths

    with bootstrap(str(config)) as env:
        paths = sample_paths(env["root"])
    base = next(p for p in paths if p.startswith("/list/") and p.count("/") == 3)
    by_kind = {
        "/": "/",
        "overview": base,
        "month": next(p for p in paths if p.startswith(base) and p.count("/") == 5 and p[len(base):len(base) + 1].isdigit()),
        "thread": next(p for p in paths if "/thread/" in p and p.startswith("/list/")),
        "message": next(p for p in paths if "/message/" in p),
        "search": next(p for p in paths if p.startswith("/search?")),
        "api thread": next(p for p in paths if p.startswith("/api/") and "/thread/" in p),
    }
    return by_kind


def fetch(port, path):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    elapsed = (time.perf_counter() - started) * 1000
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"{path} answered {response.status}")
    return elapsed


def run(folder, warm, paths, requests, connections):
    port = free_port()
    extra = "pyramid.reload_templates = false\n" + (
        f"kittypyr.warm_up = true\nkittypyr.warm_up_connections = {connections}" if warm else "kittypyr.warm_up = false")
    config = write_config(folder, port=port, extra=extra)
    started = time.perf_counter()
    log = open(folder / "startup-server.log", "ab")
    server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=log, stderr=log)
    try:
        wait_for_port(port, timeout=600, process=server)
        start_seconds = time.perf_counter() - started
        firsts = {kind: fetch(port, paths[kind]) for kind in KINDS}
        warm_p50 = {kind: statistics.median(fetch(port, paths[kind]) for _ in range(requests)) for kind in KINDS}
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    return start_seconds, firsts, warm_p50


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder for the archive (kept; reused when present)")
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/linux-mips-2005-2012.mbox.gz"))
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--connections", type=int, default=1, help="kittypyr.warm_up_connections")
    parser.add_argument("--pick", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pick:
        print(json.dumps(pick_paths(args.pick)))
        return
    folder = Path(args.data)
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(folder)
    if not (folder / "var" / "Data.fs").exists():
        print(f"importing {args.corpus} ...", flush=True)
        kittypyr("import", config, LIST, args.corpus, "--quiet", "--policy", "public", check=True, timeout=3600)
    # In a child process: the storage is locked while a process has it open.
    paths = json.loads(subprocess.run([sys.executable, __file__, "--data", args.data, "--pick", str(config)],
                                      check=True, capture_output=True, text=True).stdout)
    results = {warm: run(folder, warm, paths, args.requests, args.connections) for warm in (False, True)}
    print(f"{'':22}{'without warm-up':>28}{f'with warm-up on {args.connections}':>28}")
    print(f"{'start-up (to listening)':22}" + "".join(f"{results[w][0]:>27.2f}s" for w in (False, True)))
    print(f"{'page':22}" + f"{'first ms':>14}{'warm p50 ms':>14}" * 2)
    for kind in KINDS:
        print(f"{kind:22}" + "".join(f"{results[w][1][kind]:>14.1f}{results[w][2][kind]:>14.1f}"
                                     for w in (False, True)))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
