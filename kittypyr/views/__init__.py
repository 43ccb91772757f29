"""Pages and APIs. Each module registers views on resource types."""


def includeme(config):
    config.add_static_view("static", "kittypyr:static", cache_max_age=3600)
    config.scan("kittypyr.views")
