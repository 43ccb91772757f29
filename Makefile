# kittypyr: `make serve` to run the archive, `make test` to run every test.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
CONFIG ?= development.ini

.PHONY: install install-test serve test bench robustness clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip "setuptools<80.9" wheel

$(STAMP): $(BIN)/python setup.py
	$(BIN)/pip install -qq -e .
	touch $@

install: $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -qq -e ".[testing]"
	touch $@

# The browser tests drive Debian's Chromium; Playwright never downloads one.
/usr/bin/chromium:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# tests/test_deploy.py runs Debian's nginx in front of kittypyr (never as a service).
/usr/sbin/nginx:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx

# The RelStorage tests run a PostgreSQL cluster of their own on Debian's server.
.PHONY: postgresql
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql)

install-test: $(TEST_STAMP)

# CONFIG=production.ini make serve serves another configuration; the port is
# its [server:main] listen. pserve imports Pyramid, which warns that
# pkg_resources is deprecated, before kittypyr can say not to.
serve: install
	mkdir -p var/blobs
	@$(BIN)/python -m kittypyr.listen_check $(CONFIG)
	PYTHONWARNINGS="ignore:pkg_resources is deprecated:UserWarning" $(BIN)/pserve $(CONFIG)

# One test process per core, up to four, each given whole files, so that a
# file's servers and fixtures start once; each process starts the servers
# (Mailman core, PostgreSQL, HyperKitty, Chromium) its files need.
test: install-test /usr/bin/chromium /usr/sbin/nginx postgresql mailman-venv hyperkitty-venv
	$(BIN)/python -m pytest -n auto --maxprocesses=4 --dist loadfile tests

bench: install
	$(BIN)/python bench/import.py $(or $(CORPUS),../shared/corpora/linux-mips-2005-2012.mbox.gz)

robustness: install
	$(BIN)/python bench/robustness.py $(or $(CORPORA),$(wildcard ../shared/corpora/*.mbox.gz ../shared/corpora/pipermail/*.tar.gz))

clean:
	rm -rf $(VENV) $(MAILMAN_VENV) $(HYPERKITTY_VENV) build *.egg-info

# The Mailman integration tests run a real Mailman core, whose dependency pins
# clash with the archive's own, so it lives in a virtualenv of its own.
MAILMAN_VENV := .venv-mailman
MAILMAN_STAMP := $(MAILMAN_VENV)/.installed
# SQLAlchemy 2.1 makes Mailman 3.3.10's REST roster calls fail; gunicorn after
# 23 shares one control socket between all instances on the machine.
MAILMAN_PINS := "mailman==3.3.10" "mailman-hyperkitty==1.2.1" \
	"mailmanclient==3.3.5" "aiosmtpd==1.4.6" "SQLAlchemy>=2.0,<2.1" \
	"falcon>=3.1.3,<4" "gunicorn==23.0.0" "alembic>=1.13,<1.15"

.PHONY: mailman-venv

$(MAILMAN_STAMP):
	$(PYTHON) -m venv $(MAILMAN_VENV)
	$(MAILMAN_VENV)/bin/pip install -qq --upgrade pip
	$(MAILMAN_VENV)/bin/pip install -qq $(MAILMAN_PINS)
	touch $@

mailman-venv: $(MAILMAN_STAMP)

# tests/test_hyperkitty_import.py builds databases with a real HyperKitty, whose
# Django pins clash with the archive's too. Django 5.1 breaks HyperKitty
# 1.3.12 and django-mailman3 1.3.15; Whoosh is its search backend here, psycopg2
# its PostgreSQL driver.
HYPERKITTY_VENV := .venv-hyperkitty
HYPERKITTY_STAMP := $(HYPERKITTY_VENV)/.installed
HYPERKITTY_PINS := "HyperKitty==1.3.12" "django-mailman3==1.3.15" "Django==5.0.14" \
	"django-allauth==65.22.1" "django-haystack==3.4.0" "Whoosh==2.7.4" \
	"django-q2==1.10.0" "mailmanclient==3.3.5" "psycopg2-binary==2.9.10"

.PHONY: hyperkitty-venv

$(HYPERKITTY_STAMP):
	$(PYTHON) -m venv $(HYPERKITTY_VENV)
	$(HYPERKITTY_VENV)/bin/pip install -qq --upgrade pip
	$(HYPERKITTY_VENV)/bin/pip install -qq $(HYPERKITTY_PINS)
	touch $@

hyperkitty-venv: $(HYPERKITTY_STAMP)

# The whole suite on loopback: Mailman core, an MTA and kittypyr, until Ctrl-C.
SUITE_STAMP := $(VENV)/.installed-suite
SUITE_DIR ?= var/suite

.PHONY: suite suite-post

$(SUITE_STAMP): $(STAMP)
	$(BIN)/pip install -qq -e ".[suite]"
	touch $@

suite: $(SUITE_STAMP) mailman-venv
	$(BIN)/python -m kittypyr.suite.run --folder $(SUITE_DIR)

suite-post: $(SUITE_STAMP)
	$(BIN)/python -m kittypyr.suite.post --folder $(SUITE_DIR)
