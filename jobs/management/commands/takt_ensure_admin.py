"""Create the first admin account and print its password once."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Create superuser 'admin' with a random password (printed once) when no superuser exists."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write(
                "An admin account exists already (its password was printed when it was made)."
            )
            return
        password = secrets.token_urlsafe(12)
        port = os.environ.get("TAKT_WEB_PORT", "8000")
        User.objects.create_superuser(options["username"], "", password)
        bar = "=" * 64
        self.stdout.write(
            f"{bar}\nAdmin account created. Log in at http://127.0.0.1:{port}/admin/\n"
            f"  user:     {options['username']}\n  password: {password}\n"
            f"This password is shown only now. Change it: manage.py changepassword {options['username']}\n{bar}"
        )
