# The README's two commands: `make lab` (set up, then run the lab) and `make test` (set up, then the tests).
# They install into the active virtual environment, or else into the project's own .venv, which setup creates:
# Debian/Ubuntu's system Python refuses `pip install` outside a virtual environment (PEP 668).
VENV_PYTHON := $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python,$(CURDIR)/.venv/bin/python)
PYTHON ?= $(VENV_PYTHON)

.PHONY: setup lab test

setup:
	bash scripts/setup.sh "$(PYTHON)"

lab: setup
	"$(PYTHON)" -m ddplab run

# Two test processes: many multi-process tests wait on timeouts with a core idle, so two at once keep the two
# cores 75-94 % busy (the suite took 446.5 s on the 2-core machine on 2026-12-06; most of its CPU is torch's import,
# about 1.5 s per process, and DDP's first wrap of a model, which imports torch._dynamo: 1.7 s more per rank).
# Three at once were no faster (670 s, 2026-12-02). Units of work are tests/conftest.py's
# (pytest_xdist_make_scheduler): a module each, those that make or end orphans together, and those that read the
# golden commands' runs together.
test: setup
	bash scripts/setup-browser.sh
	"$(PYTHON)" -m pytest -q -n 2
