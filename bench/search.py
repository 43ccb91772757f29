"""Search latency over HTTP and the catalog's size, on a real archive.

    .venv/bin/python bench/search.py [--data DIR] [--corpus PATH] [--requests N] [--adversarial]
    .venv/bin/python bench/search.py --scale 10 [--data DIR]

Imports the corpus into DIR (skipped when DIR already holds an archive; the
same folder as bench/pages.py can be shared), serves it with ``pserve``,
and prints p50 / p95 latency of ``/search`` for a common word, a rare word,
a phrase, ``from:`` with a word, ``file:`` with a folder, a date range with a
word, a word of added lines and a common word one result per thread, with
the number of hits of each; then the catalog's size against the raw mail.

``--scale N`` builds, beside the corpus's archive, one of N copies of it
(each copy's Message-IDs rewritten, so none is a duplicate) and prints the
p50 of every query on both, with their ratio, and the serving process's CPU
time per request (which the machine's load does not change much); a count
marked ``~`` is an estimate.

``--adversarial`` times, instead, what one anonymous request may ask: a
20,000-word phrase, a 1,000-branch OR query and a page number far past the
last page (the search caps them; see the README's Searching section).
"""

import argparse
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import served_archive  # noqa: E402
from pages import LIST, measure, rss_mb  # noqa: E402

from kittypyr.search import SearchLimits  # noqa: E402

QUERIES = {
    "common word": "kernel",
    "rare word": "yeeloong",
    # Both words in most of the mail: read by their chunks' best postings
    # first once they are many (README, Searching: what grows with the archive).
    "two common words": "linux kernel",
    "phrase": '"cache flush"',
    "from: + word": "from:ralf kernel",
    "file:": "file:arch/mips/kernel/",
    "date range + word": "date:2010-01..2010-06 kernel",
    "patch word": "added:cpu_has_fpu",
    "one per thread": "kernel",
}
# Extra parameters of a query above.
QUERY_PARAMS = {"one per thread": {"group": "thread"}}


# Common words of the corpus, cycled: every word of the phrase is in the
# index, so the phrase is really looked for, not refused for an unknown word.
COMMON_WORDS = ("the kernel patch for mips on this is a bug in linux with that it to and "
                "of be not fix from tree board driver").split()


def adversarial_queries():
    phrase = " ".join(COMMON_WORDS[i % len(COMMON_WORDS)] for i in range(20_000))
    branches = " OR ".join(str(n) for n in range(1, 1001))
    # The costliest a query within the default limits can be: as many
    # phrases of common words as it may have, each as long as it may be.
    limits = SearchLimits()
    phrases = " ".join('"' + " ".join(COMMON_WORDS[i : i + limits.max_phrase_words]) + '"'
                       for i in range(limits.max_terms))
    words = " ".join(COMMON_WORDS[: limits.max_terms])
    alternatives = " OR ".join(COMMON_WORDS[: limits.max_or_branches])
    return {
        "20,000-word phrase": {"q": f'"{phrase}"'},
        "1,000-branch OR": {"q": branches},
        "common words": {"q": words},
        "OR of common words": {"q": alternatives},
        "longest phrases": {"q": phrases},
        "page 10**30": {"q": "kernel", "page": str(10**30)},
    }


def catalog_size(config):
    """Bytes of every stored record reachable from the catalog and its document map."""
    from pyramid.paster import bootstrap
    from ZODB.serialize import referencesf

    with bootstrap(str(config)) as env:
        archive = env["root"]
        storage = archive._p_jar.db().storage
        pending = [archive.catalog._p_oid, archive.document_map._p_oid]
        seen = set(pending)
        total = 0
        while pending:
            oid = pending.pop()
            data, _ = storage.load(oid)
            total += len(data)
            for ref in referencesf(data):
                if ref not in seen:
                    seen.add(ref)
                    pending.append(ref)
        raw = sum(m.size for ml in archive.lists.values() for m in ml.messages.values())
        return {"catalog": total, "raw": raw}


def scaled_corpus(corpus, copies, target):
    """Write ``copies`` copies of ``corpus`` to ``target`` (an mbox), each with its own Message-IDs.

    Every ``<local@domain>`` of a header block becomes ``<local.cN@domain>``
    in copy N, so threads stay threads within their copy and no copy is a
    duplicate of another.
    """
    import gzip
    import re

    msgid = re.compile(rb"<([^<>@\s]+)@")
    if target.exists():
        return target
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as out:
        for copy in range(copies):
            suffix = b".c%d@" % copy
            opener = gzip.open if str(corpus).endswith(".gz") else open
            with opener(corpus, "rb") as source:
                in_headers = False
                previous_blank = True
                for line in source:
                    if previous_blank and line.startswith(b"From "):
                        in_headers = True
                    elif in_headers and line in (b"\n", b"\r\n"):
                        in_headers = False
                    elif in_headers:
                        line = msgid.sub(lambda m: b"<" + m.group(1) + suffix, line)
                    previous_blank = line in (b"\n", b"\r\n")
                    out.write(line)
    partial.rename(target)
    return target


def time_queries(port, requests, server=None):
    """``{name: (query, hits, first ms, p50 ms, p95 ms, server CPU ms a request)}`` for QUERIES."""
    figures = {}
    for name, query in QUERIES.items():
        params = dict(QUERY_PARAMS.get(name, {}), q=query, mlist=LIST)
        url = "/search?" + urllib.parse.urlencode(params)
        first = measure(port, url, 1)[0]  # the first answer loads what the others find in memory
        before = process_cpu_seconds(server.pid) if server else 0.0
        _, p50, p95 = measure(port, url, requests)
        cpu = (process_cpu_seconds(server.pid) - before) * 1000 / (requests + 2) if server else float("nan")
        cold = first
        figures[name] = (query, hits(port, query, params), cold, p50, p95, cpu)
    return figures


def process_cpu_seconds(pid):
    """User and system CPU time of process ``pid`` so far."""
    import os

    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hits(port, query, params=None):
    """The count the JSON API gives, as text: ``~`` before an estimate."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    params = params or {"q": query, "mlist": LIST}
    connection.request("GET", "/api/search?" + urllib.parse.urlencode(params))
    answer = json.loads(connection.getresponse().read())
    connection.close()
    return ("~" if answer.get("count_estimated") else "") + str(answer["count"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder for the archive (kept; reused when present)")
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/linux-mips-2005-2012.mbox.gz"))
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--adversarial", action="store_true",
                        help="time the costliest queries one request may ask")
    parser.add_argument("--scale", type=int, default=0,
                        help="also build an archive of this many copies of the corpus (new Message-IDs) "
                             "in DATA/scaled-N and print both columns")
    parser.add_argument("--size-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.size_of:
        print(json.dumps(catalog_size(args.size_of)))
        return

    if args.scale:
        data = Path(args.data or "/tmp/kittypyr-search-scale")
        data.mkdir(parents=True, exist_ok=True)
        columns = {}
        with served_archive(str(data / "1x"), args.corpus, LIST, "kittypyr-search-") as (_, port, server, _):
            columns["1x"] = time_queries(port, args.requests, server)
        scaled = scaled_corpus(Path(args.corpus), args.scale, data / f"corpus-{args.scale}x.mbox")
        with served_archive(str(data / f"{args.scale}x"), str(scaled), LIST, "kittypyr-search-") as (
                _, port, server, _):
            columns["scaled"] = time_queries(port, args.requests, server)
            rss = rss_mb(server.pid)
        n = f"{args.scale}x"
        print(f"{'query':20} {'q':30} {'hits 1x':>8} {'p50 1x':>7} {'cpu 1x':>7} {'hits ' + n:>9} "
              f"{'p50 ' + n:>7} {'cpu ' + n:>7} {'ratio':>6} {'cpu ratio':>9}")
        for name in QUERIES:
            query, found, _, p50, _, cpu = columns["1x"][name]
            _, found_scaled, _, p50_scaled, _, cpu_scaled = columns["scaled"][name]
            print(f"{name:20} {query:30} {found:>8} {p50:7.1f} {cpu:7.1f} {found_scaled:>9} "
                  f"{p50_scaled:7.1f} {cpu_scaled:7.1f} {p50_scaled / p50:6.2f} {cpu_scaled / cpu:9.2f}")
        print(f"server RSS after the {args.scale}x run: {rss:.0f} MB; p50 and cpu in ms a request")
        return

    if args.adversarial:
        with served_archive(args.data, args.corpus, LIST, "kittypyr-search-") as (_, port, server, _):
            print(f"{'query':20} {'query chars':>11} {'hits':>6} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
            for name, params in adversarial_queries().items():
                url = "/search?" + urllib.parse.urlencode(dict(params, mlist=LIST))
                try:
                    cold, p50, p95 = measure(port, url, args.requests)
                except RuntimeError as failed:  # a 500 is a figure too: the page number one
                    print(f"{name:20} {len(params['q']):11d} {'':>6} {str(failed).split()[-1]:>9}")
                    continue
                found = hits(port, params["q"])
                print(f"{name:20} {len(params['q']):11d} {found:>6} {cold:9.1f} {p50:8.1f} {p95:8.1f}")
            print(f"server RSS after the run: {rss_mb(server.pid):.0f} MB")
        return

    with served_archive(args.data, args.corpus, LIST, "kittypyr-search-") as (config, port, server, _):
        print(f"{'query':20} {'q':32} {'hits':>6} {'first ms':>9} {'p50 ms':>8} {'p95 ms':>8}")
        for name, (query, found, cold, p50, p95, _) in time_queries(port, args.requests).items():
            print(f"{name:20} {query:32} {found:>6} {cold:9.1f} {p50:8.1f} {p95:8.1f}")
        print(f"server RSS after the run: {rss_mb(server.pid):.0f} MB")

    sizes = json.loads(subprocess.run([sys.executable, __file__, "--size-of", str(config)], check=True,
                                      capture_output=True, text=True).stdout)
    mb = 1024 * 1024
    print(f"catalog {sizes['catalog'] / mb:.1f} MB for {sizes['raw'] / mb:.1f} MB of raw mail "
          f"({sizes['catalog'] / sizes['raw']:.2f}x)")


if __name__ == "__main__":
    main()
