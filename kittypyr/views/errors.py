"""Pages for what is not there, and the headers every response carries."""

from pyramid.events import NewResponse, subscriber
from pyramid.view import notfound_view_config

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
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
    request.response.status = 404
    return {"mailing_list": request.current_list}
