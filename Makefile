# Takt developer entry points. The logic lives in deploy/dev/*.sh; see
# deploy/README.md for production and cluster setups.
#
#   make run                 everything on this machine: web, worker, beat,
#                            flower (and a private Redis unless REDIS_URL is set)
#   make test [ARGS="-k x"]  the pytest suite (DATABASE_URL=postgres://... for PostgreSQL)
#   make test-stress         make test with a CPU burner per core beside it
#                            (TAKT_STRESS_ROUNDS=3: three times in a row)
#   make test-model          the engine's model-based test, deep: TAKT_MODEL_EXAMPLES
#                            random sequences (default 5000; docs/testing.md)
#   make lint                ruff check + ruff format --check
#   make screenshots         the browser tests on SQLite, saving docs/images/admin/*.png
#   make chaos [ARGS=...]    the chaos test, long form (about 10 min; kills, Redis
#                            restart, database outage; see docs/failures.md)
#   make bench               benchmarks, full matrix (20-40 min; see benchmarks/README.md)
#   make bench-quick         benchmarks, small sizes (about 3 minutes)
#   make clean               remove var/ (all local state), .venv and takt.egg-info

ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help run test test-stress test-model lint screenshots chaos clean bench bench-quick

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

run:
	@bash deploy/dev/run.sh

test:
	@bash deploy/dev/test.sh $(ARGS)

test-stress:
	@bash deploy/dev/stress.sh $(ARGS)

# One process (-n 0): the examples run one after another anyway.
test-model:
	@TAKT_MODEL_EXAMPLES=$${TAKT_MODEL_EXAMPLES:-5000} bash deploy/dev/test.sh -n 0 \
		tests/integration/test_engine_model.py -q $(ARGS)

lint:
	@bash deploy/dev/lint.sh

# SQLite whatever DATABASE_URL says: the pictures must not depend on it.
screenshots:
	@DATABASE_URL= TAKT_SCREENSHOTS=1 bash deploy/dev/test.sh -m browser tests/browser $(ARGS)

# Its own PostgreSQL cluster and Redis: DATABASE_URL and REDIS_URL are not used.
chaos:
	@bash -c '. deploy/dev/lib.sh && cd "$$TAKT_ROOT" && takt_bootstrap && takt_ensure_redis_server \
		&& exec nice "$$TAKT_VENV/bin/python" -m tests.chaos.run "$$@"' chaos $(ARGS)

bench:
	@bash benchmarks/bench.sh --profile full $(ARGS)

bench-quick:
	@bash benchmarks/bench.sh --profile quick $(ARGS)

clean:
	rm -rf var .venv takt.egg-info
