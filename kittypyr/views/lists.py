"""The lists index and a list's overview (its months and years: kittypyr.views.months)."""

from pyramid.httpexceptions import HTTPMovedPermanently, HTTPNotFound
from pyramid.view import view_config

from kittypyr.resources import Archive, MailingList, MailingLists
from kittypyr.resources.browsing import ListAlias
from kittypyr.stats import activity_of, today, window_of
from kittypyr.tags import list_tags
from kittypyr.views.community import fingerprint, marks_fingerprint, profile_url, thread_marks, track_list
from kittypyr.views.presentation import activity_chart, display_name, set_validators, sparkline
from kittypyr.votes import top_threads


def list_summary(mailing_list, day):
    activity = activity_of(mailing_list)
    window = window_of(activity, day)
    daily = [count for _, count in activity.daily_counts(window.end, window.days)]
    return {
        "list": mailing_list,
        "recent": sum(daily),
        "last_post": activity.newest_day(),
        "window": window,
        "participants": activity.participant_count(window.end, window.days),
        "sparkline": sparkline(daily),
    }


@view_config(context=Archive, renderer="kittypyr.templates:index.pt")
def archive_index(context, request):
    day = today()
    name_filter = request.params.get("name", "").strip().lower()
    order = "name" if request.params.get("sort") == "name" else "activity"
    summaries = [
        list_summary(mailing_list, day)
        for mailing_list in request.visible_lists
        if not name_filter
        or name_filter in mailing_list.address
        or name_filter in mailing_list.display_name.lower()
    ]
    set_validators(request, None, "index", len(summaries),
                   sum(s["list"].message_count for s in summaries), day, order, name_filter)
    if order == "name":
        summaries.sort(key=lambda s: s["list"].display_name.lower())
    else:
        # The latest post first: a list quiet since 2011 sorts below one active in 2019,
        # whatever their sizes.
        summaries.sort(key=lambda s: (-(s["last_post"].toordinal() if s["last_post"] else 0),
                                      -s["recent"], -s["list"].message_count, s["list"].address))
    return {"summaries": summaries, "name_filter": name_filter, "order": order}


@view_config(context=MailingLists)
def lists_folder(context, request):
    raise HTTPNotFound()


@view_config(context=MailingList, renderer="kittypyr.templates:list.pt")
def list_overview(context, request):
    day = today()
    activity = activity_of(context)
    window = window_of(activity, day)
    threads = context.threads
    busiest = []
    for key, count in activity.busiest_threads(window.end, window.days):
        thread = threads.live(key)
        if thread is not None and thread not in (t for t, _ in busiest):
            busiest.append((thread, count))
    # Every list of threads is read from the front of one of the list's
    # thread orders (kittypyr.stats): its cost does not grow with the list.
    recent = threads.named(activity.active_thread_keys(0, 15))
    # "New threads" leaves out those "Recent threads" shows already: on a
    # quiet list they are the same threads, and the section is left out.
    shown = {thread.__name__ for thread in recent}
    newest = [thread for thread in threads.named(activity.newest_thread_keys(10 + len(shown)))
              if thread.__name__ not in shown][:10]
    popular = top_threads(context, 10)
    largest = threads.named(activity.largest_thread_keys(10))
    tags = list_tags(context)
    track_list(request, context)
    marks = thread_marks(request, recent + newest + [t for t, _ in busiest] + popular + largest)
    set_validators(request, None, "list", context.message_count, context.thread_count, day,
                   marks_fingerprint(marks), fingerprint(tags))
    return {
        "mailing_list": context,
        "recent_threads": recent,
        "new_threads": newest,
        "busiest_threads": busiest[:10],
        "popular_threads": popular,
        "tags": tags[:30],
        # Without Mailman nobody votes or tags: an order by them leads somewhere
        # only where the archive has some (brought from HyperKitty).
        "popularity_offered": request.mailman_available or bool(popular),
        "tags_offered": request.mailman_available or bool(tags),
        "marks": marks,
        "largest_threads": largest,
        "window": window,
        "top_senders": posters(request, activity.top_senders(window.end, window.days)),
        "top_senders_ever": posters(request, activity.top_senders_ever()),
        "years": by_year(reversed(activity.months()), MONTHS_SHOWN_FOR_YEARS),
        "chart": activity_chart([c for _, c in activity.daily_counts(window.end, window.days)]),
    }


# The overview names every year of the list, and the months of its latest
# years only: a list of forty years would otherwise print five hundred
# months on its front page (2.3 times the page's time at ten times the
# mail); an older month is one click away, on its year's page.
MONTHS_SHOWN_FOR_YEARS = 2


def by_year(months, months_for):
    """``[(year, messages, [(year, month, messages)])]`` of ``months``, in their order.

    Only the first ``months_for`` years keep their months.
    """
    years = []
    for month in months:
        if not years or years[-1][0] != month[0]:
            years.append((month[0], 0, []))
        year, total, shown = years[-1]
        if len(years) <= months_for:
            shown.append(month)
        years[-1] = (year, total + month[2], shown)
    return years


def posters(request, ranked):
    """``[{name, count, url}]`` for ranked ``(address, name, messages)``: each links to its profile."""
    people = request.root.people
    found = []
    for address, name, count in ranked:
        person_id = people.person_id(address)
        found.append({"name": display_name(name, address), "count": count,
                      "url": profile_url(request, person_id) if person_id else None})
    return found


@view_config(context=ListAlias)
def list_alias(context, request):
    """301 from a list's address in other case to its lower-case URL, keeping the path and the query.

    One URL a page, so that links and caches do not split between spellings.
    """
    location = request.resource_url(context.target, *context.rest)
    if context.rest and request.path_info.endswith("/"):
        location += "/"
    if request.query_string:
        location += "?" + request.query_string
    return HTTPMovedPermanently(location=location)
