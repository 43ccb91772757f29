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
    mailing_list = request.current_list
    if mailing_list is not None and not request.has_permission("view", mailing_list):
        # Inside a private list, what is missing is as secret as what is there.
        from kittypyr.views.accounts import forbidden

        return forbidden(request)
    request.response.status = 404
    return {"mailing_list": mailing_list}
