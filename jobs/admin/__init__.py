"""The admin pages of the jobs app: glue over all three apps (it may import
from jobs, runs and heartbeats; nothing below it imports the admin).

Django's admin autodiscovery imports this package; each module imported
here registers its ModelAdmin or adds its pages:

* job.py (the job list and editor, with triggers.py, job_list.py,
  panels.py and coordination.py), calendars.py, groups.py (concurrency
  groups, result variables), queue.py, tokens.py;
* imports.py and timeline.py add their pages through the job admin's URLs;
  timeline_data.py and display.py are what those pages draw and how times
  and statuses are shown.
"""

from jobs.admin import (  # noqa: F401  (each registers its admin)
    calendars,
    groups,
    job,
    queue,
    tokens,
)
