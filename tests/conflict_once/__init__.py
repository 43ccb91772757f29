"""An extension for the tests: the first attempt of each archive request fails
with a ConflictError, as when another process committed to the same objects
first, so pyramid_retry runs the request again.

The failure is raised from a subscriber, after the message was stored in the
first attempt's (then aborted) transaction, which is where a real conflict
at commit time leaves a request.
"""

from pyramid.view import view_config
from ZODB.POSException import ConflictError

from kittypyr.events import IMessageArchived
from kittypyr.resources.api import ApiMailman

# Message-IDs (and form values) whose first attempt has already failed.
failed_once = set()


def fail_first_attempt(event):
    message_id = event.message.message_id
    if message_id not in failed_once:
        failed_once.add(message_id)
        raise ConflictError(f"forced conflict archiving {message_id}")


@view_config(context=ApiMailman, name="echo-form", request_method="POST", renderer="json",
             require_csrf=False, permission="view")
def echo_form(context, request):
    """Answers the fields of a form post, failing its first attempt."""
    token = request.POST.get("token", "")
    if token not in failed_once:
        failed_once.add(token)
        raise ConflictError("forced conflict reading a form")
    return {"fields": dict(request.POST.items())}


def fail_after_posting_tween_factory(handler, registry):
    """A post from the web conflicts once after its view ran (and sent the mail)."""

    def fail_once_after(request):
        response = handler(request)
        key = ("post", request.path_info)
        if request.method == "POST" and request.path_info.endswith(("/reply", "/new")) and key not in failed_once:
            failed_once.add(key)
            raise ConflictError("forced conflict after a post was sent")
        return response

    return fail_once_after


def includeme(config):
    config.add_subscriber(fail_first_attempt, IMessageArchived)
    config.add_tween("tests.conflict_once.fail_after_posting_tween_factory", under="pyramid_tm.tm_tween_factory")
    config.scan(__name__)
