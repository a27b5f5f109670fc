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

test: setup
	bash scripts/setup-browser.sh
	"$(PYTHON)" -m pytest -q
