"""Pages for what is not there, and the headers every response carries."""

from pyramid.events import NewResponse, subscriber
from pyramid.view import notfound_view_config

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
    return {"mailing_list": request.current_list}
