"""Page timing and a serving process's RSS with each bound on a connection's placeholders, in turns.

    .venv/bin/python bench/placeholder_bound.py DIR... [--bounds 0 40000] [--rounds 2] [--requests 25]

Each DIR is an archive folder as ``bench/scale.py --data DIR`` leaves it
(DIR for 10×, DIR/again for 1×). For each round, each bound
(``kittypyr.connection_placeholders_max``; 0: none) and each DIR in turn,
one waitress process serves the archive and is asked for bench/scale.py's
pages (picked once from the first DIR's list: give the 1× first), each
page warmed once and then timed ``--requests`` times; printed: the p50 of
each kind of page and the server's RSS at the end. Taking the bounds in
turns spreads the machine's drift over all of them.
"""

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import scale  # noqa: E402
from common import placeholders_line  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--bounds", nargs="+", type=int, default=[0, 40_000])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=25, help="timed requests per page")
    args = parser.parse_args()
    pages = scale.pick_pages(args.folders[0].resolve() / "var")
    print(f"p50 ms of each kind of page, {args.requests} requests a page; RSS MB of the server at the end", flush=True)
    for round_number in range(1, args.rounds + 1):
        for bound in args.bounds:
            for folder in args.folders:
                figures, rss = scale.time_pages(folder.resolve(), pages, args.requests,
                                                extra=placeholders_line(bound))
                print(f"round {round_number}  bound {bound:7}  {str(folder)[-28:]:28} "
                      + "  ".join(f"{kind} {ms:5.1f}" for kind, ms in figures.items()) + f"  RSS {rss:4.0f}",
                      flush=True)


if __name__ == "__main__":
    main()
