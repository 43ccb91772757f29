"""Answers a site owes to browsers and robots, outside the archive's pages."""

from pyramid.httpexceptions import HTTPMovedPermanently
from pyramid.view import view_config

from kittypyr.resources import Archive


@view_config(context=Archive, name="favicon.ico")
def favicon(context, request):
    """Browsers ask for /favicon.ico whatever a page links: send them to the site's icon."""
    return HTTPMovedPermanently(location=request.static_url("kittypyr:static/favicon.svg"))
