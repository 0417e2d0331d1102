# Takt developer entry points. The logic lives in deploy/dev/*.sh; see
# deploy/README.md for production and cluster setups.
#
#   make run                 everything on this machine: web, worker, beat,
#                            flower (and a private Redis unless REDIS_URL is set)
#   make test [ARGS="-k x"]  the pytest suite (DATABASE_URL=postgres://... for PostgreSQL)
#   make lint                ruff check + ruff format --check
#   make clean               remove var/ (all local state), .venv and takt.egg-info

ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help run test lint clean

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

run:
	@bash deploy/dev/run.sh

test:
	@bash deploy/dev/test.sh $(ARGS)

lint:
	@bash deploy/dev/lint.sh

clean:
	rm -rf var .venv takt.egg-info
