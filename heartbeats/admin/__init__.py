"""The admin pages of the heartbeats app (glue): the operations page, the
heartbeat and alert admins (operations.py) and the landing page's data
(summary.py)."""

from heartbeats.admin import operations  # noqa: F401  (registers the heartbeat and alert admins)
