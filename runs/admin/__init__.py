"""The admin pages of the runs app (glue): the run list and a run's page
(run.py, with filters.py and live.py), the audit trail and the decision
log (decisions.py)."""

from runs.admin import (
    decisions,  # noqa: F401  (registers the decision log)
    run,  # noqa: F401  (registers the run and audit admins)
)
