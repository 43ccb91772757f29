"""The lists index and a list's own page."""

from pyramid.view import view_config

from kittypyr.resources import Archive, MailingList


@view_config(context=Archive, renderer="kittypyr.templates:index.pt")
def archive_index(context, request):
    mailing_lists = sorted(context.lists.values(), key=lambda m: m.address)
    return {"mailing_lists": mailing_lists}


@view_config(context=MailingList, renderer="kittypyr.templates:list.pt")
def list_overview(context, request):
    return {"mailing_list": context}
