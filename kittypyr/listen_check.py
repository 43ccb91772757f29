"""``python -m kittypyr.listen_check CONFIG``: whether the address the server is to listen on is free.

``make serve`` asks it before starting pserve, which otherwise ends with
a traceback ("Address already in use") when another program holds the
port. Exits 0 when every address of ``[server:main] listen`` can be
bound, else 1, saying which one is taken and what to do.
"""

import configparser
import errno
import socket
import sys


def listen_addresses(config_path):
    """``[(host, port)]`` of waitress's ``listen`` (or ``host``/``port``) in the .ini's ``[server:main]``."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(config_path)
    if not parser.has_section("server:main"):
        return []
    server = parser["server:main"]
    if "listen" in server:
        addresses = []
        for item in server["listen"].split():
            host, _, port = item.rpartition(":")
            addresses.append((host.strip("[]") or "0.0.0.0", port))
        return addresses
    return [(server.get("host", "0.0.0.0"), server.get("port", "8080"))]


def taken(host, port):
    """The error binding ``host:port`` gives (an OSError), or None when it is free."""
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, ValueError) as exc:
        return exc
    family, kind, protocol, _, address = infos[0]
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc
    return None


def main(argv=None):
    config_path = (argv or sys.argv[1:] or ["development.ini"])[0]
    for host, port in listen_addresses(config_path):
        error = taken(host, port)
        if error is None:
            continue
        if getattr(error, "errno", None) == errno.EADDRINUSE:
            print(f"kittypyr: {host}:{port} (listen in {config_path}) is in use by another program: stop it, "
                  f"or give another port in {config_path}'s [server:main] listen", file=sys.stderr)
        else:
            print(f"kittypyr: cannot listen on {host}:{port} (listen in {config_path}): {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
