"""The read-only JSON API for integrators. Addresses are always obfuscated; Message-IDs are not addresses."""

from pyramid.traversal import find_root
from pyramid.view import view_config

from kittypyr.rendering import obfuscate_address
from kittypyr.resources.api import ApiEmail, ApiGone, ApiList, ApiLists, ApiThread, ApiThreads
from kittypyr.stats import activity_of
from kittypyr.views.presentation import Page, file_label, page_number

PAGE_SIZE = 50


def _paginated(request, total, items, page):
    return {
        "count": total,
        "page": page.number,
        "pages": page.count,
        "next": request.path_url + f"?page={page.number + 1}" if page.has_next else None,
        "previous": request.path_url + f"?page={page.number - 1}" if page.has_previous else None,
        "results": items,
    }


def list_json(request, mailing_list):
    return {
        "address": obfuscate_address(mailing_list.address),
        "name": mailing_list.display_name,
        "description": mailing_list.description,
        "messages": mailing_list.message_count,
        "threads": mailing_list.thread_count,
        "url": request.resource_url(mailing_list),
        "threads_url": request.resource_url(find_root(mailing_list), "api", "list",
                                            mailing_list.address, "threads"),
    }


def thread_json(request, thread):
    return {
        "key": thread.__name__,
        "subject": obfuscate_address(thread.subject),
        "messages": len(thread),
        "participants": len(thread.participants),
        "date_started": thread.date_started.isoformat() if thread.date_started else None,
        "last_active": thread.last_date.isoformat() if thread.last_date else None,
        "url": request.resource_url(thread),
    }


def email_json(request, message, depth=None):
    data = {
        "hash": message.__name__,
        # An identifier readers paste into b4 or git send-email: as it is.
        "message_id": message.message_id,
        "subject": obfuscate_address(message.subject),
        "sender_name": obfuscate_address(message.sender_name),
        "sender_address": obfuscate_address(message.sender_address),
        "date": message.date.isoformat(),
        "parent": message.parent,
        "thread": message.thread,
        "url": request.resource_url(message),
        "attachments": [
            {"index": a.index, "filename": file_label(a.filename), "content_type": a.content_type,
             "size": a.size}
            for a in message.attachments
        ],
    }
    if depth is not None:
        data["depth"] = depth
    return data


@view_config(context=ApiLists, renderer="json")
def api_lists(context, request):
    lists = sorted(request.visible_lists, key=lambda m: m.address)
    page = Page(page_number(request), len(lists), PAGE_SIZE)
    chosen = lists[page.start : page.start + PAGE_SIZE]
    return _paginated(request, len(lists), [list_json(request, m) for m in chosen], page)


@view_config(context=ApiList, renderer="json")
def api_list(context, request):
    return list_json(request, context.mailing_list)


@view_config(context=ApiThreads, renderer="json")
def api_threads(context, request):
    mailing_list = context.mailing_list
    total = mailing_list.thread_count
    page = Page(page_number(request), total, PAGE_SIZE)
    # Latest activity first, read from the front of the list's order of threads.
    threads = mailing_list.threads.named(activity_of(mailing_list).active_thread_keys(page.start, PAGE_SIZE))
    return _paginated(request, total, [thread_json(request, t) for t in threads], page)


@view_config(context=ApiThread, renderer="json")
def api_thread(context, request):
    thread = context.thread
    walked = list(thread.walk())
    page = Page(page_number(request), len(walked), PAGE_SIZE)
    messages = thread.mailing_list.messages
    emails = [email_json(request, messages[name], depth)
              for name, depth in walked[page.start : page.start + PAGE_SIZE]]
    data = thread_json(request, thread)
    data["emails"] = _paginated(request, len(walked), emails, page)
    return data


@view_config(context=ApiEmail, renderer="json")
def api_email(context, request):
    data = email_json(request, context.message)
    data["body"] = obfuscate_address(context.message.body_text)
    return data


@view_config(context=ApiGone, renderer="json")
def api_gone(context, request):
    """410: deleted by the list's administrators."""
    request.response.status = 410
    return {"error": "deleted from the archive", "deleted": context.deleted.deleted_at.isoformat()}
