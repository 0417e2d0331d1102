"""The chaos test (issue 12): Takt's processes killed at random, Redis
restarted without persistence, the database taken away; then every fire
time is checked against a side channel of executions (docs/failures.md)."""
