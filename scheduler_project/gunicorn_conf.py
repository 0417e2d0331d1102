"""gunicorn's settings for Takt's web process:

    gunicorn -c python:scheduler_project.gunicorn_conf scheduler_project.wsgi --bind …

With TAKT_LOG_FORMAT=json gunicorn's own lines (start-up, worker
restarts, the access log if turned on) are JSON objects like every other
Takt line (scheduler_project/logconfig.py). gunicorn reads this before
Django starts, so the variable comes from the environment here.
"""

from __future__ import annotations

import os

from scheduler_project.logconfig import json_config

# Recent gunicorn opens a control socket in the user's home (~/.gunicorn);
# the web process needs none, and the takt user's home is the code.
control_socket_disable = True

if os.environ.get("TAKT_LOG_FORMAT", "").strip().lower() == "json":
    _gunicorn = {"handlers": ["console"], "level": "INFO", "propagate": False}
    logconfig_dict = json_config({"gunicorn.error": _gunicorn, "gunicorn.access": _gunicorn})
