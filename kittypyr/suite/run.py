"""``make suite``: a demo Mailman 3 site on loopback, archived by kittypyr, until Ctrl-C.

Everything lives in one folder (``var/suite`` by default) and is kept
between runs: Mailman's database and logs, kittypyr's storage, the mail the
MTA delivered (``mail/``, one ``.eml`` a message: what members receive,
confirmation links) and ``suite.json``, which says where everything listens
for ``kittypyr.suite.post``.
"""

import argparse
import json
import secrets
import signal
import sys
import threading
from pathlib import Path

from zc.lockfile import LockError, LockFile

from kittypyr.suite.mailman_core import MailmanError, free_port, port_accepts
from kittypyr.suite.stack import MailmanStack

DOMAIN = "lists.example.org"
PUBLIC_LIST = "demo"
PRIVATE_LIST = "board"
ADMIN = "admin@example.org"
ADMIN_NAME = "Site Admin"


class DemoStack(MailmanStack):
    """The stack, keeping each mail the MTA receives as a file and naming it on the console."""

    def _relay(self, received):
        mail = self.folder / "mail"
        mail.mkdir(exist_ok=True)
        path = mail / f"{len(list(mail.iterdir())) + 1:05d}.eml"
        path.write_bytes(received.data)
        subject = received.message.get("Subject", "")
        print(f"  mail to {', '.join(received.rcpt_tos)}: {subject!r} ({path})", flush=True)
        super()._relay(received)


def load_secrets(folder):
    """The demo's secrets, made once per folder so that sessions and the password survive a restart."""
    path = folder / "secrets.json"
    if path.exists():
        return json.loads(path.read_text())
    made = {name: secrets.token_urlsafe(24) for name in ("archiver_key", "secret")}
    made["admin_password"] = secrets.token_urlsafe(9)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(made, indent=2))
    path.chmod(0o600)
    return made


def pick_port(wanted):
    """``wanted`` when free, otherwise any free port: two suites may run side by side."""
    return wanted if wanted and not port_accepts(wanted) else free_port()


def populate(stack, password):
    """The demo domain, its public and private list and the site administrator account."""
    public = stack.create_list(DOMAIN, PUBLIC_LIST, archive_policy="public",
                               description="A public list to try kittypyr with")
    private = stack.create_list(DOMAIN, PRIVATE_LIST, archive_policy="private",
                                description="A private list: members and administrators only")
    stack.create_user(ADMIN, ADMIN_NAME, password, public, private)
    stack.create_user(ADMIN, ADMIN_NAME, password, public, private, role="owner")
    return public, private


def describe(stack, password):
    """What to open and how to log in: the lines printed once the suite is up."""
    base = stack.archive.base_url
    return [
        "kittypyr and Mailman 3 are running on loopback. Ctrl-C stops all of it.",
        "",
        f"  archive         {base}",
        f"  log in          {base}login  as {ADMIN}, password {password}  (site administrator)",
        f"  public list     {PUBLIC_LIST}@{DOMAIN}   {base}list/{PUBLIC_LIST}@{DOMAIN}/",
        f"  private list    {PRIVATE_LIST}@{DOMAIN}  {base}list/{PRIVATE_LIST}@{DOMAIN}/  (after logging in)",
        f"  post            make suite-post   (or any mail client: SMTP 127.0.0.1:{stack.sink.port}, no login)",
        f"  Mailman REST    {stack.core.rest_url}/3.1  ({stack.core.rest_user} / {stack.core.rest_password})",
        f"  delivered mail  {stack.folder / 'mail'}/",
        f"  logs            {stack.archive.log}, {stack.core.log_dir}/",
        "",
        "suite ready",
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kittypyr.suite.run", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="var/suite", help="where everything is kept (default: var/suite)")
    parser.add_argument("--port", type=int, default=8080, help="kittypyr's port (default 8080, or a free one)")
    parser.add_argument("--smtp-port", type=int, default=8025,
                        help="the MTA's port (default 8025, or a free one)")
    args = parser.parse_args(argv)
    folder = Path(args.folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        # Held until this process ends: a second suite on the folder would
        # rewrite the running one's configuration and stop its archiving.
        running = LockFile(str(folder / "suite.lock"))
    except LockError:
        print(f"a suite is already running in {folder}: stop it with Ctrl-C in its terminal, or run another "
              "in a folder of its own (make suite SUITE_DIR=var/suite2)", file=sys.stderr)
        return 1
    try:
        return _run(folder, args)
    finally:
        running.close()


def _run(folder, args):
    demo = load_secrets(folder)
    stack = DemoStack(folder, demo["archiver_key"], demo["secret"], admins=[ADMIN],
                      archive_port=pick_port(args.port), smtp_port=pick_port(args.smtp_port),
                      sync_ttl=10, log_level="INFO")

    stopping = threading.Event()
    # SIGINT as well as SIGTERM: Ctrl-C must stop Mailman too, which runs
    # detached from the terminal and would outlive a KeyboardInterrupt.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    print(f"starting Mailman core, the MTA and kittypyr in {folder} (10 to 20 seconds)...", flush=True)
    try:
        stack.start()
        populate(stack, demo["admin_password"])
        (folder / "suite.json").write_text(json.dumps({
            "archive": stack.archive.base_url,
            "smtp_port": stack.sink.port,
            "lmtp_port": stack.core.lmtp_port,
            "rest_url": stack.core.rest_url,
            "admin": ADMIN,
            "public_list": f"{PUBLIC_LIST}@{DOMAIN}",
            "private_list": f"{PRIVATE_LIST}@{DOMAIN}",
        }, indent=2))
        print("\n".join(describe(stack, demo["admin_password"])), flush=True)
        while not stopping.wait(1):
            if stack.archive.process.poll() is not None:
                print(f"kittypyr exited; see {stack.archive.log}", file=sys.stderr)
                return 1
    except (MailmanError, RuntimeError, TimeoutError) as exc:
        print(f"the suite could not start: {exc}", file=sys.stderr)
        return 1
    finally:
        print("stopping...", flush=True)
        stack.stop()
        (folder / "suite.json").unlink(missing_ok=True)
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
