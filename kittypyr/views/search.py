"""The search page, its help page and its JSON form."""

from pyramid.view import view_config

from kittypyr.resources import Archive
from kittypyr.resources.api import ApiSearch
from kittypyr.search import GROUPS, SORTS, SearchLimits, run_search, visible_list_addresses
from kittypyr.views.presentation import Page, display_name, format_date, page_number

PAGE_SIZE = 20


def _search(archive, request):
    query = request.params.get("q", "").strip()
    mlist = request.params.get("mlist") or None
    sort = request.params.get("sort", "relevance")
    group = request.params.get("group") or "message"
    number = max(1, page_number(request))
    results = run_search(archive, query, visible_list_addresses(request), mlist=mlist, sort=sort,
                         start=(number - 1) * PAGE_SIZE, size=PAGE_SIZE,
                         limits=SearchLimits.from_settings(request.registry.settings), group=group)
    if results.group == "thread":
        rows = results.threads
    else:
        # A count shown rounded still numbers the pages exactly when it is known.
        rows = results.total if results.matched is None else results.matched
    return query, mlist, results, Page(number, rows or 0, PAGE_SIZE)


@view_config(context=Archive, name="search", renderer="kittypyr.templates:search.pt")
def search_page(context, request):
    query, mlist, results, page = _search(context, request)
    hits = [
        {
            "message": hit.message,
            "sender": display_name(hit.message.sender_name, hit.message.sender_address),
            "date": format_date(hit.message.date),
            "list": hit.message.mailing_list,
            "snippet": hit.snippet,
            "more": hit.thread_matches - 1 if results.group == "thread" else 0,
        }
        for hit in results.hits
    ]
    return {"query": query, "mlist": mlist, "results": results, "hits": hits, "page": page,
            "sorts": SORTS, "groups": GROUPS}


@view_config(context=Archive, name="search-help", renderer="kittypyr.templates:search_help.pt")
def search_help(context, request):
    return {"limits": SearchLimits.from_settings(request.registry.settings)}


@view_config(context=ApiSearch, renderer="json")
def api_search(context, request):
    from kittypyr.views.api import email_json

    query, mlist, results, page = _search(context.archive, request)
    return {
        "query": query,
        "count": results.total,
        "count_estimated": results.total_estimated,
        "page": page.number,
        "pages": page.count,
        "problems": results.problems,
        "group": results.group,
        "results": [
            # No score: its words' weights are counted over every list,
            # closed ones too, and would tell what those hold.
            dict(email_json(request, hit.message), snippet=str(hit.snippet),
                 **({"thread_matches": hit.thread_matches} if results.group == "thread" else {}))
            for hit in results.hits
        ],
        **({"threads": results.threads, "threads_estimated": results.threads_estimated}
           if results.group == "thread" else {}),
    }
