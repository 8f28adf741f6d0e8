# The few commands that matter; `make help` lists them. Run `make install` first.
# `make test` is the README's test command, word for word, so it also works on a fresh clone.

.DEFAULT_GOAL := help
BIN := .venv/bin

.PHONY: help install chat test lint fmt typecheck migrate clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

install: ## create .venv and install Cairn (editable) with the dev tools
	python3 -m venv .venv
	$(BIN)/pip install -e '.[dev]'

chat: ## talk to Cairn in this terminal (the console frontend)
	$(BIN)/cairn chat

test: ## the README test command: venv, editable install with test extras, pytest
	python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest -n 2 --dist loadfile

lint: ## ruff lint, and check the formatting without changing files
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: ## apply ruff's safe fixes and format the code
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: ## mypy --strict on the cairn package (settings in pyproject.toml)
	$(BIN)/mypy

migrate: ## bring the configured database (CAIRN_DATABASE_URL) to the newest schema
	$(BIN)/cairn migrate

clean: ## remove caches and build output (keeps .venv)
	rm -rf build dist ./*.egg-info .pytest_cache .mypy_cache .ruff_cache htmlcov .coverage
	find . \( -path ./.venv -o -path ./.git \) -prune -o -type d -name __pycache__ -exec rm -rf {} +
