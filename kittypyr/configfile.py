"""The .ini file a command runs with: its logging, its settings and the application it makes.

``pyramid.paster`` asks plaster for a loader each time (once for the
logging, once for the application, once for each setting read), and plaster
finds one by reading the entry points of every installed package: a
quarter to two fifths of a second of every command here. An .ini
file (the only kind kittypyr documents) is read by plaster_pastedeploy's
loader, made here directly; any other kind still goes through plaster's
search, which says what it cannot read.
"""

import plaster
import plaster_pastedeploy
from pyramid.scripting import prepare

# How the example configurations (production.ini, deploy/kittypyr.ini,
# development.ini) begin a value to replace: kittypyr.secret once, and
# kittypyr.archiver_key. Published with kittypyr, it opens nothing.
EXAMPLE_VALUE_PREFIX = "change-me"


def is_example_value(value):
    """Whether a setting still holds an example configuration's value to replace."""
    return value.strip().lower().startswith(EXAMPLE_VALUE_PREFIX)


# The schemes plaster_pastedeploy's own entry points register.
_PASTEDEPLOY_SCHEMES = frozenset({"file+ini", "pastedeploy", "pastedeploy+ini", "egg", "pastedeploy+egg"})


def config_loader(config_uri):
    """The plaster loader of ``config_uri`` (``production.ini``, ``development.ini#main``)."""
    uri = plaster.parse_uri(config_uri)
    if uri.scheme in _PASTEDEPLOY_SCHEMES:
        return plaster_pastedeploy.Loader(uri)
    return plaster.get_loader(uri, protocols=["wsgi"])


def setup_logging(config_uri):
    config_loader(config_uri).setup_logging()


def app_settings(config_uri):
    """The [app:...] settings of ``config_uri``, as ``pyramid.paster.get_appsettings`` gives them."""
    return config_loader(config_uri).get_wsgi_app_settings()


def bootstrap(config_uri):
    """``pyramid.paster.bootstrap``: the application made and an environment (root, request, closer) for it."""
    app = config_loader(config_uri).get_wsgi_app()
    # The registry the application just made is the last one pushed, as
    # pyramid.paster.bootstrap finds it.
    env = prepare()
    env["app"] = app
    return env
