"""Pages for what is not there, and the headers every response carries."""

from urllib.parse import unquote_to_bytes

from pyramid.events import NewResponse, subscriber
from pyramid.exceptions import BadCSRFToken
from pyramid.httpexceptions import HTTPBadRequest
from pyramid.renderers import render_to_response
from pyramid.response import Response
from pyramid.view import notfound_view_config, view_config

from kittypyr.mail import is_utf8

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


@subscriber(NewResponse)
def protective_headers(event):
    """Mail is untrusted: no page may run or load anything but our own files."""
    headers = event.response.headers
    headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")


@notfound_view_config(renderer="kittypyr.templates:notfound.pt")
def not_found(request):
    """404, or 403 where traversal stopped inside something the visitor may not view.

    Inside a private list, its pages or its JSON, what is missing is as
    secret as what is there: a hash answers the same whether a message has
    it, had it or never had it.
    """
    found = getattr(request, "context", None)
    if found is not None and not request.has_permission("view", found):
        from kittypyr.views.accounts import forbidden

        return forbidden(request)
    request.response.status = 404
    if request.path_info.startswith("/api/"):
        # The JSON API's readers read JSON, its 403 as its 404.
        return render_to_response("json", {"error": "there is nothing at this address"}, request=request,
                                  response=request.response)
    return {"mailing_list": request.current_list}


@view_config(context=HTTPBadRequest, renderer="kittypyr.templates:refused.pt")
def bad_request(exc, request):
    """400 as a page of the site, saying what was wrong; under /api/, as its caller reads it (JSON)."""
    if request.path_info.startswith("/api/") or getattr(request, "root", None) is None:
        return exc  # (before traversal no page of the site can be made)
    request.response.status = exc.status
    if isinstance(exc, BadCSRFToken):
        return {"title": "This form is out of date",
                "detail": "Its page was opened before you logged in or out, or in another session: go back,"
                          " reload the page and send the form again."}
    return {"title": "This request could not be understood", "detail": exc.detail or exc.explanation}


NOT_UTF8 = "The address holds bytes that are not UTF-8 text: correct the link or the query.\n"


def utf8_addresses_tween_factory(handler, registry):
    """400 for a path or a query that is not UTF-8 once decoded, before any code reads it.

    A link pasted from a page in another charset, or a probe: every
    reader of ``request.params`` or of the path would raise, a 500.
    """

    def only_utf8_addresses(request):
        environ = request.environ
        # WSGI gives the decoded path and the raw query, as Latin-1 strings.
        path, query = environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
        # Nearly every request: an ASCII path and no %-escape, nothing to decode.
        if not (path.isascii() and query.isascii() and "%" not in query):
            if not (is_utf8(path.encode("latin-1", "replace")) and
                    is_utf8(unquote_to_bytes(query.encode("latin-1", "replace")))):
                return Response(NOT_UTF8, status=400, content_type="text/plain", charset="utf-8")
        return handler(request)

    return only_utf8_addresses
