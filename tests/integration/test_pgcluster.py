"""The private PostgreSQL cluster the outage and chaos tests take away
(tests/pgcluster.py): its own directory and port, stopped and started."""

from __future__ import annotations

import subprocess

import pytest

from tests.pgcluster import PrivateCluster, server_binaries

pytestmark = pytest.mark.skipif(
    server_binaries() is None, reason="PostgreSQL's server is not installed (initdb, pg_ctl)"
)


def test_a_private_cluster_starts_stops_and_starts_again():
    cluster = PrivateCluster()
    try:
        cluster.start()
        assert cluster.url("takt") == f"postgres://postgres@127.0.0.1:{cluster.port}/takt"
        cluster.create_database("takt")
        assert cluster.psql("SELECT 1", db="takt") == "1"
        cluster.stop()
        with pytest.raises(subprocess.CalledProcessError):
            cluster.psql("SELECT 1")
        cluster.start()
        cluster.kill_connections()
        assert cluster.psql("SELECT current_database()", db="takt") == "takt"
    finally:
        cluster.destroy()
