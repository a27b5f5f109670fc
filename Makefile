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

# Two test processes: most multi-process tests wait on timeouts with the cores idle (drills and node drills
# used 37 % of two cores), so two at once take about 420 s where one took 603 s on the 2-core machine. Units of
# work are tests/conftest.py's (pytest_xdist_make_scheduler): a module each, those that make or end orphans together.
test: setup
	bash scripts/setup-browser.sh
	"$(PYTHON)" -m pytest -q -n 2
