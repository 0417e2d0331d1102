"""The admin pages of the runs app (glue): the run list and a run's page
(run.py, with filters.py and live.py) and the audit trail."""

from runs.admin import run  # noqa: F401  (registers the run and audit admins)
