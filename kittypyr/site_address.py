"""The site's address: absolute links, redirects and feed ids are never on a host a client made up.

Without ``kittypyr.base_url`` they are made from the request, as Pyramid
makes them. With it, the request's Host (or the trusted proxy's
X-Forwarded-Host) is believed only when it is a loopback name asked from
this machine (an administrator's ``curl``, Mailman on loopback, a test);
any other, the site's own host in other capitals or over http too, is
replaced by ``base_url``'s scheme and host. A client sending ``Host: evil.example``
would otherwise get redirects, links, the API's URLs and the ids of feed
entries (which must not change) on that host, and a cache in front could
keep such a page for everyone. The path prefix stays the one the server
gives (waitress's ``url_prefix``).
"""

import functools
import ipaddress
import re
from urllib.parse import urlsplit

from pyramid.tweens import INGRESS

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def site_address_tween_factory(handler, registry):
    settings = registry.settings

    def from_site_address(request):
        configured = settings.get("kittypyr.base_url", "")
        if configured:
            scheme, host, name, port = _parts(configured)
            # The site's own host is written as base_url writes it: asked in
            # capitals or over http it would make other links and feed ids.
            if not _loopback_asked(request):
                environ = request.environ
                environ["wsgi.url_scheme"] = scheme
                environ["HTTP_HOST"] = host
                environ["SERVER_NAME"] = name
                environ["SERVER_PORT"] = port
        return handler(request)

    return from_site_address


def _loopback_asked(request):
    """Whether the request's Host is a loopback name (on any port), asked from this machine.

    The whole Host is read: WebOb's ``domain`` cuts it at its last colon,
    and ``127.0.0.1:6543@evil.example`` would pass as a loopback name
    while every URL made from it names evil.example.
    """
    asked = _host_and_port(request.host)
    return asked is not None and asked[0] in _LOOPBACK_NAMES and _is_loopback(request.remote_addr)


# A Host as RFC 9110 has it: a name, an IPv4 address or a bracketed IPv6
# one, then perhaps a colon and a port of digits; nothing else.
_HOST = re.compile(r"(?P<name>[a-z0-9._-]+|\[[0-9a-f:.]+\])(?::(?P<port>[0-9]{1,5}))?", re.IGNORECASE | re.ASCII)


def _host_and_port(host):
    """``(name in lower case, port or None)`` of a Host header's value; None for anything not a host."""
    matched = _HOST.fullmatch(host or "")
    if matched is None:
        return None
    return matched["name"].lower(), matched["port"]


def _is_loopback(address):
    try:
        return ipaddress.ip_address(address or "").is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=4)
def _parts(base_url):
    """``(scheme, host[:port], host name, port)`` of ``base_url``."""
    address = urlsplit(base_url)
    return (address.scheme, address.netloc, (address.hostname or "").lower(),
            str(address.port or (443 if address.scheme == "https" else 80)))


def includeme(config):
    config.add_tween("kittypyr.site_address.site_address_tween_factory", under=INGRESS)
