"""The settings of the test session and of the live processes the tests
start (tests/live_fixtures.py): Takt's own settings, with two changes.

Passwords are hashed with a fast hasher. Django's default (PBKDF2, a million
rounds) takes about 0.3 s a hash on the 2-core machine, and every API and
admin test makes a user and logs in: that was a fifth of the suite's time.
What a test checks of a login (the form, the session, the redirect, a wrong
password refused) does not depend on the hasher's cost. Production keeps
Django's default (scheduler_project/settings.py sets none), and the tests
that start a fresh process with the real settings (test_production_settings,
test_local_setup) still use it.
"""

import os

from scheduler_project.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The test process moves its clock by hand (time_machine) and passes `now=`
# around: the database's clock (runs/clock.py) would not follow. The live
# processes the tests start read the database's, as in production
# (TAKT_CLOCK in their environment, tests/live_fixtures.py).
TAKT_CLOCK = os.environ.get("TAKT_CLOCK", "local")
