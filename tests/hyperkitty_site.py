"""A real HyperKitty (its own virtualenv, .venv-hyperkitty, made by `make hyperkitty-venv`)
in the smallest Django project around it, to build HyperKitty databases from mail."""

import subprocess
import textwrap
from pathlib import Path

HYPERKITTY_PYTHON = Path(__file__).resolve().parent.parent / ".venv-hyperkitty" / "bin" / "python"

_SETTINGS = '''
from pathlib import Path
HERE = Path(__file__).resolve().parent
SECRET_KEY = "test-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
SITE_ID = 1
ROOT_URLCONF = "urls"
INSTALLED_APPS = [
    "hyperkitty", "django_mailman3", "django.contrib.admin", "django.contrib.auth",
    "django.contrib.contenttypes", "django.contrib.sessions", "django.contrib.sites",
    "django.contrib.messages", "django.contrib.staticfiles", "django.contrib.humanize",
    "rest_framework", "django_gravatar", "compressor", "haystack", "django_extensions",
    "django_q", "allauth", "allauth.account", "allauth.socialaccount",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django_mailman3.middleware.TimezoneMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request", "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
        "django_mailman3.context_processors.common", "hyperkitty.context_processors.common",
    ]},
}]
DATABASES = {"default": DATABASE}
HAYSTACK_CONNECTIONS = {"default": {"ENGINE": "haystack.backends.whoosh_backend.WhooshEngine",
                                    "PATH": str(HERE / "fulltext_index")}}
Q_CLUSTER = {"name": "hyperkitty", "workers": 1, "orm": "default", "sync": True}
MAILMAN_REST_API_URL = "http://127.0.0.1:9"
MAILMAN_REST_API_USER = "restadmin"
MAILMAN_REST_API_PASS = "restpass"
MAILMAN_ARCHIVER_KEY = "key"
MAILMAN_ARCHIVER_FROM = ("127.0.0.1", "::1")
COMPRESS_ENABLED = False
STATIC_URL = "/static/"
STATIC_ROOT = str(HERE / "static")
ACCOUNT_EMAIL_VERIFICATION = "none"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
'''

_URLS = '''
from django.urls import include, path
urlpatterns = [
    path("archives/", include("hyperkitty.urls")),
    path("", include("django_mailman3.urls")),
    path("accounts/", include("allauth.urls")),
]
'''


class HyperKittySite:
    """A Django project in ``folder`` whose database is ``folder/hyperkitty.db``."""

    def __init__(self, folder, postgresql=None):
        """``postgresql``: (host, port, user, database name) to keep the database there."""
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        if postgresql is None:
            database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(self.folder / "hyperkitty.db")}
        else:
            host, port, user, name = postgresql
            database = {"ENGINE": "django.db.backends.postgresql", "HOST": host, "PORT": str(port),
                        "USER": user, "NAME": name}
        (self.folder / "settings.py").write_text(f"DATABASE = {database!r}\n" + _SETTINGS)
        (self.folder / "urls.py").write_text(_URLS)
        (self.folder / "manage.py").write_text(textwrap.dedent('''
            import os, sys
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
            from django.core.management import execute_from_command_line
            execute_from_command_line(sys.argv)
        '''))
        self.database = self.folder / "hyperkitty.db"

    def manage(self, *args):
        """Run ``manage.py args``; return its standard output."""
        done = subprocess.run([str(HYPERKITTY_PYTHON), "manage.py", *args], cwd=self.folder,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def shell(self, code):
        """Run Python ``code`` in HyperKitty's Django shell; return what it printed."""
        return self.manage("shell", "-c", code)
