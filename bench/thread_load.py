"""How fast the longest patch series opens in headless Chromium.

    .venv/bin/python bench/thread_load.py [--data DIR] [--corpus PATH] [--loads N]

Imports the corpus into DIR (skipped when DIR already holds an archive),
serves it with ``pserve``, picks the list's largest thread whose subject
says ``PATCH`` (the largest thread when none does) and prints its HTML
size, the bytes before its first message, and the median and worst time
to the load event over N loads in Debian's Chromium, with the page width
of a desktop and of a phone.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import served_archive  # noqa: E402

LIST = "bench@lists.example.org"
CHROMIUM = "/usr/bin/chromium"


def pick_thread(config):
    """The path of the thread to open, chosen before the server holds the storage."""
    from pyramid.paster import bootstrap

    with bootstrap(str(config)) as env:
        mailing_list = env["root"].lists[LIST]
        threads = list(mailing_list.threads.values())
        series = [t for t in threads if "PATCH" in (t.subject or "").upper()]
        chosen = max(series or threads, key=len)
        return {"path": env["request"].resource_path(chosen), "messages": len(chosen), "subject": chosen.subject}


def load_times(url, loads, width, height):
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.goto(url)  # warms the server's caches and the browser's for the static files
        for _ in range(loads):
            page.goto(url, wait_until="load")
            times.append(page.evaluate(
                "performance.getEntriesByType('navigation')[0].loadEventStart"))
        browser.close()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder for the archive (kept; reused when present)")
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/linux-mips-2005-2012.mbox.gz"))
    parser.add_argument("--loads", type=int, default=10)
    parser.add_argument("--pick", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pick:
        print(json.dumps(pick_thread(args.pick)))
        return

    def choose(config):
        # In a child process: the storage is locked while a process has it open.
        return json.loads(subprocess.run([sys.executable, __file__, "--pick", str(config)], check=True,
                                         capture_output=True, text=True).stdout)

    with served_archive(args.data, args.corpus, LIST, "kittypyr-thread-", choose) as (_, port, _, chosen):
        url = f"http://127.0.0.1:{port}{chosen['path']}"
        html = urllib.request.urlopen(url).read()
        first = html.find(b"<article")
        print(f"thread: {chosen['subject']!r}, {chosen['messages']} messages")
        print(f"HTML: {len(html) / 1024:.0f} KB, before the first message: {first / 1024:.0f} KB")
        for label, width, height in (("desktop 1280x800", 1280, 800), ("phone 360x740", 360, 740)):
            times = load_times(url, args.loads, width, height)
            print(f"load event, {label}: median {statistics.median(times):.0f} ms, "
                  f"worst {max(times):.0f} ms over {len(times)} loads")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
