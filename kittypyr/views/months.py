"""A list's year and month pages, as HyperKitty shows them.

A month lists the threads started in it, 50 a page, a row each: the
starter with their avatar, replies, participants, last activity, votes,
tags, an attachment mark and the opening words of the first message.
Everything comes from the list's aggregates and the thread records; the
only messages loaded are the page's first ones.
"""

import calendar
import re

from pyramid.httpexceptions import HTTPNotFound
from pyramid.view import view_config

from kittypyr.mail import searchable_text
from kittypyr.rendering import obfuscate_address
from kittypyr.resources.browsing import Month, Year
from kittypyr.stats import activity_of
from kittypyr.views.community import marks_fingerprint, thread_marks, track_list
from kittypyr.views.presentation import Page, avatar, display_name, page_number, set_validators

MONTH_PAGE_SIZE = 50
# How much of a first message a row shows, and how much of it is read for that.
EXCERPT_LENGTH = 200
EXCERPT_READ = 4000
SORTS = {"activity": "latest activity", "start": "start date"}

_SPACES = re.compile(r"\s+")


def excerpt(body_text, length=EXCERPT_LENGTH):
    """The opening words of a message's own text (no quotes, patches or signature), addresses hidden."""
    words = _SPACES.sub(" ", searchable_text(body_text[:EXCERPT_READ])).strip()
    if len(words) > length:
        words = words[:length].rsplit(" ", 1)[0] + " …"
    return obfuscate_address(words)


def thread_rows(request, mailing_list, threads):
    """What a month page shows of each thread, in order."""
    messages = mailing_list.messages
    activity = activity_of(mailing_list)
    rows = []
    for thread in threads:
        starter = messages.get(thread.starter) if thread.starter else None
        name, address = (starter.sender_name, starter.sender_address) if starter is not None else ("", "")
        rows.append({
            "thread": thread,
            "starter": display_name(name, address),
            "avatar": avatar(name, address, size=32),
            "replies": max(len(thread) - 1, 0),
            "participants": len(thread.participants),
            "last_date": thread.last_date,
            "has_attachment": activity.has_attachment(thread.__name__),
            "excerpt": excerpt(starter.body_text) if starter is not None else "",
        })
    return rows


def _month_key(year, month):
    return f"{year:04d}-{month:02d}"


def neighbour_months(activity, key):
    """``(previous, next)`` 'YYYY-MM' keys of the nearest months with mail, or None."""
    before = activity.per_month.keys(max=key, excludemax=True)
    after = activity.per_month.keys(min=key, excludemin=True)
    return (before[-1] if len(before) else None), (after[0] if len(after) else None)


def _month_link(request, mailing_list, key):
    if key is None:
        return None
    year, month = int(key[:4]), int(key[5:])
    return {"label": key, "url": request.resource_url(mailing_list[str(year)][str(month)])}


@view_config(context=Month, renderer="kittypyr.templates:month.pt")
def month_page(context, request):
    mailing_list = context.mailing_list
    sort = request.params.get("sort", "activity")
    if sort not in SORTS:
        sort = "activity"
    activity = activity_of(mailing_list)
    # A page of the month's threads, read from the list's thread orders: a
    # month ten times as busy has ten times the pages, each as costly.
    total = activity.month_thread_count(context.key)
    page = Page(page_number(request), total, MONTH_PAGE_SIZE)
    threads = mailing_list.threads.named(
        activity.month_thread_keys(context.key, page.start, MONTH_PAGE_SIZE, by_start=sort == "start"))
    previous, following = neighbour_months(activity, context.key)
    track_list(request, mailing_list)
    marks = thread_marks(request, threads)
    set_validators(request, None, "month", context.key, sort, page.number,
                   activity.per_month.get(context.key, 0), total, previous, following,
                   tuple((t.__name__, len(t)) for t in threads), marks_fingerprint(marks))
    return {
        "month": context,
        "mailing_list": mailing_list,
        "rows": thread_rows(request, mailing_list, threads),
        "threads": threads,
        "page": page,
        "marks": marks,
        "sort": sort,
        "sorts": SORTS,
        "month_name": calendar.month_name[context.month],
        "previous_month": _month_link(request, mailing_list, previous),
        "next_month": _month_link(request, mailing_list, following),
    }


def _year_link(request, mailing_list, key):
    return None if key is None else {"label": key[:4], "url": request.resource_url(mailing_list, key[:4], "")}


@view_config(context=Year, renderer="kittypyr.templates:year.pt")
def year_page(context, request):
    """The months of a year that hold mail, with their counts; 404 for a year without mail."""
    mailing_list = context.mailing_list
    activity = activity_of(mailing_list)
    first, last = _month_key(context.year, 1), _month_key(context.year, 12)
    months = [(int(key[5:]), count) for key, count in activity.per_month.items(first, last)]
    if not months:
        raise HTTPNotFound()
    before = activity.per_month.keys(max=first, excludemax=True)
    after = activity.per_month.keys(min=last, excludemin=True)
    set_validators(request, None, "year", mailing_list.address, context.year, tuple(months),
                   before[-1] if len(before) else None, after[0] if len(after) else None)
    return {
        "year": context,
        "mailing_list": mailing_list,
        "months": [{"name": calendar.month_name[month], "count": count,
                    "url": request.resource_url(context, str(month), "")} for month, count in months],
        "total": sum(count for _, count in months),
        "previous_year": _year_link(request, mailing_list, before[-1] if len(before) else None),
        "next_year": _year_link(request, mailing_list, after[0] if len(after) else None),
    }
