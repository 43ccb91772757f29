import os

from setuptools import setup

here = os.path.abspath(os.path.dirname(__file__))
with open(os.path.join(here, "README.md"), encoding="utf-8") as f:
    README = f.read()

requires = [
    "pyramid>=2.0",
    "pyramid_chameleon",
    # Reads the .ini file for the commands (kittypyr.configfile); Pyramid's own dependency.
    "plaster_pastedeploy",
    "pyramid_tm",
    "pyramid_retry",
    "pyramid_zodbconn",
    "ZODB>=6",
    "zodburi",
    "ZEO",
    "repoze.catalog",
    # repoze.catalog imports six without declaring it.
    "six",
    "mailmanclient",
    "waitress",
    "transaction",
    "tqdm",
    "charset-normalizer",
    # Sanitizes the HTML part of a message for its "as sent" view.
    "nh3",
    "markupsafe",
    # The search ranking scores whole posting lists at once (kittypyr.fulltext).
    "numpy",
    # Pyramid 2 still resolves asset specs through pkg_resources, which from
    # setuptools 80.9 warns at every start, and is gone from 81.
    "setuptools<80.9",
]

# RelStorage on PostgreSQL, the storage beside ZEO for many processes
# (zodbconn.uri = postgres://...); the binary psycopg2 needs no compiler.
postgresql_require = ["RelStorage>=4.0", "psycopg2-binary"]

tests_require = postgresql_require + [
    "pytest",
    # make test runs the tests in as many processes as the machine has cores (up to four).
    "pytest-xdist",
    "WebTest",
    "playwright",
    "aiosmtpd",
    "beautifulsoup4",
    # axe-core, run in the browser tests.
    "axe-playwright-python",
    # Reads the Atom feeds back as feed readers do, in the tests.
    "feedparser",
]

setup(
    name="kittypyr",
    version="0.1.0",
    description="A web archive for GNU Mailman 3 mailing lists on Pyramid and ZODB",
    long_description=README,
    long_description_content_type="text/markdown",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Framework :: Pyramid",
        "Topic :: Communications :: Email :: Mailing List Servers",
    ],
    python_requires=">=3.10",
    # The templates live at the top of the source tree but ship inside the
    # package as kittypyr.templates, so an installed wheel renders them.
    packages=[
        "kittypyr",
        "kittypyr.resources",
        "kittypyr.views",
        "kittypyr.suite",
        "kittypyr.templates",
        # Data only, but a package of its own for setuptools, which would
        # otherwise warn at every install that it is not listed.
        "kittypyr.static",
    ],
    package_dir={"kittypyr.templates": "templates"},
    package_data={
        "kittypyr.static": ["*"],
        "kittypyr.templates": ["*.pt"],
    },
    include_package_data=True,
    zip_safe=False,
    install_requires=requires,
    # make suite's MTA; Mailman core itself lives in a virtualenv of its own.
    extras_require={"testing": tests_require, "suite": ["aiosmtpd"], "postgresql": postgresql_require},
    entry_points={
        "paste.app_factory": ["main = kittypyr:main"],
        "console_scripts": ["kittypyr = kittypyr.cli:main"],
    },
)
