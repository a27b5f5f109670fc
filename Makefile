# The README's two commands: `make lab` (set up, then run the lab) and `make test` (set up, then the tests).
PYTHON ?= python3

.PHONY: setup lab test

setup:
	bash scripts/setup.sh $(PYTHON)

lab: setup
	$(PYTHON) -m ddplab run

test: setup
	bash scripts/setup-browser.sh
	$(PYTHON) -m pytest -q
