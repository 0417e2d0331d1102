"""F-41/F-42: `manage.py create_api_token` — make an API token and print it
once (only its hash is stored)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from jobs.audit import AuditedCommand
from jobs.models import Job
from jobs.tokens import ApiToken


class Command(AuditedCommand):
    help = (
        "Make an API token for a user (acts with the user's permissions) and/or scoped to a"
        " job (may only start that job and read its runs); prints it once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="what the token is for")
        parser.add_argument("--user", help="username the token acts for")
        parser.add_argument("--job", type=int, help="id of the job the token is scoped to")
        parser.add_argument("--expires-in-days", type=int, help="default: never expires")

    def handle(self, *args: Any, **options: Any) -> None:
        user = job = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"--user: no user named {options['user']!r}")
        if options["job"] is not None:
            job = Job.objects.filter(pk=options["job"]).first()
            if job is None:
                raise CommandError(f"--job: no job with id {options['job']}")
        if user is None and job is None:
            raise CommandError("give --user, --job, or both")
        days = options["expires_in_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-in-days: must be 1 or more")
        token = ApiToken(name=options["name"][:100], user=user, job=job)
        if days:
            token.expires_at = timezone.now() + timedelta(days=days)
        text = token.issue()
        token.save()
        if job is not None and job.api_trigger_permission == "off":
            self.stderr.write(
                f"note: job #{job.pk}'s API trigger permission is 'off': set it to 'token' or"
                " 'authenticated' before this token can start it"
            )
        self.stdout.write(text)
