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
	$(BIN)/pip install --quiet --upgrade pip "setuptools<81" wheel

$(STAMP): $(BIN)/python setup.py
	$(BIN)/pip install --quiet -e .
	touch $@

install: $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e ".[testing]"
	touch $@

# The browser tests drive Debian's Chromium; Playwright never downloads one.
/usr/bin/chromium:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

install-test: $(TEST_STAMP)

serve: install
	mkdir -p var/blobs
	$(BIN)/pserve $(CONFIG)

test: install-test /usr/bin/chromium
	$(BIN)/python -m pytest tests

bench: install
	$(BIN)/python bench/import.py $(or $(CORPUS),../shared/corpora/linux-mips-2005-2012.mbox.gz)

robustness: install
	$(BIN)/python bench/robustness.py $(or $(CORPORA),$(wildcard ../shared/corpora/*.mbox.gz ../shared/corpora/pipermail/*.tar.gz))

clean:
	rm -rf $(VENV) build *.egg-info
