"""`manage.py watch_files`: watch the folders of the file triggers and the
RUN-file folders in a process of its own (F-16, F-17), for a machine that
sees folders no beat machine sees. Every beat watches them too (unless
TAKT_WATCH_FILES=false); the Redis lease keeps one watcher per folder."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from runs.watching import Watcher


class Command(BaseCommand):
    help = "Watch the folders of the file triggers and the RUN-file folders until stopped."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        watcher = Watcher(name="watch_files")
        watcher.start()
        self.stdout.write(f"watching folders as {watcher.token}; Ctrl-C stops")
        self.stdout.flush()
        stop.wait()
        watcher.stop()
        self.stdout.write("stopped; the folders are free for another watcher")
