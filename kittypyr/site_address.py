"""The site's address: absolute links, redirects and feed ids come from ``kittypyr.base_url``.

Without it they are made from the request, as Pyramid makes them. With
it, the Host header (or the proxy's X-Forwarded-Host) decides nothing: a
client sending ``Host: evil.example`` would otherwise get redirects, links,
the API's URLs and the ids of feed entries (which must not change) on that
host, and a cache in front could keep such a page for everyone. The path
prefix stays the one the server gives (waitress's ``url_prefix``).
"""

import functools
from urllib.parse import urlsplit

from pyramid.tweens import INGRESS


def site_address_tween_factory(handler, registry):
    settings = registry.settings

    def from_site_address(request):
        configured = settings.get("kittypyr.base_url", "")
        if configured:
            environ = request.environ
            scheme, host, name, port = _parts(configured)
            environ["wsgi.url_scheme"] = scheme
            environ["HTTP_HOST"] = host
            environ["SERVER_NAME"] = name
            environ["SERVER_PORT"] = port
        return handler(request)

    return from_site_address


@functools.lru_cache(maxsize=4)
def _parts(base_url):
    """``(scheme, host[:port], host name, port)`` of ``base_url``."""
    address = urlsplit(base_url)
    return (address.scheme, address.netloc, address.hostname or "",
            str(address.port or (443 if address.scheme == "https" else 80)))


def includeme(config):
    config.add_tween("kittypyr.site_address.site_address_tween_factory", under=INGRESS)
