"""Warming a new process up before it serves: templates compiled, each kind of page answered once.

Without it the first request of each page type pays for compiling its
templates and for loading the catalog's and the list's records into the
connection's cache: hundreds of milliseconds, against a few once warm.
``warm_up`` runs in ``main`` (``kittypyr.warm_up = true``, as in
production.ini), before the server opens its port, so whatever answers a
readiness check is warm already.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from urllib.parse import quote

from pyramid.renderers import get_renderer
from pyramid.request import Request
from pyramid.scripting import prepare
from repoze.catalog.query import Eq

from kittypyr.catalog import search

log = logging.getLogger(__name__)

TEMPLATES = "kittypyr.templates"


def compile_templates(registry):
    """Compile every template of the package now; return how many."""
    names = sorted(entry.name for entry in files(TEMPLATES).iterdir() if entry.name.endswith(".pt"))
    for name in names:
        get_renderer(f"{TEMPLATES}:{name}", registry=registry).implementation().cook_check()
    return len(names)


def sample_paths(archive):
    """The path of one page of each kind readers fetch, from the newest message of a public list."""
    paths = ["/", "/search-help", "/login", "/api/lists/", "/no-such-page"]
    public = [m.address for m in archive.lists.values() if m.is_public]
    if not public:
        return paths
    query = Eq("kind", "message") & Eq("list", public[0])
    total, newest = search(archive, query, sort_index="date", limit=1, reverse=True)
    for message in newest:
        address = quote(message.mailing_list.address)
        base = f"/list/{address}/"
        word = next((w for w in message.subject.split() if w.isalpha() and len(w) > 3), "mail")
        paths += [
            base,
            f"{base}{message.date.year}/",
            f"{base}{message.date.year}/{message.date.month}/",
            f"{base}thread/{message.thread}/",
            f"{base}message/{message.__name__}/",
            f"{base}threads",
            f"{base}tag/",
            f"/search?q={quote(word)}",
            f"/search?q={quote(word)}&mlist={address}",
            f"/api/list/{address}/",
            f"/api/list/{address}/threads/",
            f"/api/list/{address}/thread/{message.thread}/",
            f"/api/list/{address}/email/{message.__name__}/",
        ]
    return paths


def warm_up(app, connections=1):
    """Compile the templates and answer each kind of page once on ``connections`` connections at once.

    Each concurrent request takes a connection of its own from the pool, so
    that many have their caches filled. Returns the seconds it took.
    """
    started = time.monotonic()
    registry = app.registry
    count = compile_templates(registry)
    with prepare(registry=registry) as env:
        paths = sample_paths(env["root"])
        env["request"].tm.abort()
    base_url = registry.settings.get("kittypyr.base_url") or "http://localhost/"

    def answer_all(_):
        for path in paths:
            request = Request.blank(path, base_url=base_url.rstrip("/"), remote_addr="127.0.0.1")
            response = request.get_response(app)
            if response.status_code >= 500:
                log.warning("warm-up: %s answered %s", path, response.status)

    with ThreadPoolExecutor(max_workers=connections) as pool:
        list(pool.map(answer_all, range(connections)))
    seconds = time.monotonic() - started
    log.info("warmed up in %.2f s: %d templates, %d pages on %d connection(s)", seconds, count, len(paths),
             connections)
    return seconds
