"""Pages and APIs. Each module registers views on resource types."""

from pyramid.traversal import find_interface
from pyramid.tweens import INGRESS

from kittypyr.resources import MailingList
from kittypyr.views.community import current_reader


def current_list(request):
    """The mailing list the page is about, or None: it scopes the search box."""
    context = getattr(request, "context", None)
    return find_interface(context, MailingList) if context is not None else None


def includeme(config):
    config.add_request_method(current_list, "current_list", reify=True)
    config.add_request_method(current_reader, "reader", reify=True)
    config.add_static_view("static", "kittypyr:static", cache_max_age=3600)
    config.scan("kittypyr.views")
    config.add_tween("kittypyr.views.errors.utf8_addresses_tween_factory", under=INGRESS)
