"""``make suite-post``: post a message to the running suite's demo list and wait for it to be archived.

The message goes in the way a reader's mail does: by SMTP to the site's
MTA, which hands it to Mailman, whose archiver plugin posts it to kittypyr.
"""

import argparse
import json
import smtplib
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path

from kittypyr.msgid import message_id_hash


def compose(sender, list_address, subject, body):
    message = EmailMessage()
    message["From"] = f"Site Admin <{sender}>"
    message["To"] = list_address
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.now(timezone.utc))
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2])
    message.set_content(body)
    return message


def answers(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kittypyr.suite.post", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="var/suite", help="the running suite's folder (default: var/suite)")
    parser.add_argument("--private", action="store_true", help="post to the private list instead")
    parser.add_argument("--subject", default=None)
    parser.add_argument("--body", default="Posted with make suite-post.\n")
    parser.add_argument("--timeout", type=float, default=30, help="seconds to wait for the archive")
    args = parser.parse_args(argv)
    try:
        suite = json.loads((Path(args.folder) / "suite.json").read_text())
    except OSError:
        print(f"no suite is running in {args.folder}: start it with `make suite`", file=sys.stderr)
        return 2
    list_address = suite["private_list" if args.private else "public_list"]
    subject = args.subject or f"Hello from make suite-post at {datetime.now():%H:%M:%S}"
    message = compose(suite["admin"], list_address, subject, args.body)
    key = message_id_hash(message["Message-ID"])
    url = f"{suite['archive']}list/{list_address}/message/{key}/"
    # The JSON API answers 200 once the message is stored.
    api_url = f"{suite['archive']}api/list/{list_address}/email/{key}/"
    sent = time.monotonic()
    with smtplib.SMTP("127.0.0.1", suite["smtp_port"], timeout=30) as smtp:
        smtp.send_message(message)
    print(f"posted {subject!r} to {list_address}")
    if args.private:
        # Anonymous readers get 403 there, so there is nothing to wait on.
        print(f"log in to read it: {url}")
        return 0
    while not answers(api_url):
        if time.monotonic() - sent > args.timeout:
            print(f"not archived after {args.timeout:.0f} s: see the suite's logs", file=sys.stderr)
            return 1
        time.sleep(0.05)
    print(f"archived in {time.monotonic() - sent:.2f} s: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
