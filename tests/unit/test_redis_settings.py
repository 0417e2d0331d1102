"""Reading the Redis Sentinel settings (F-85): REDIS_SENTINELS,
REDIS_SENTINEL_MASTER, REDIS_PASSWORD, REDIS_SENTINEL_PASSWORD, REDIS_DB.
A bad value is refused with a message naming the setting."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from scheduler_project.redisconfig import SentinelConfig, parse_sentinels, sentinel_config


def config(raw: str = "s1:26379,s2:26380", **kw: object) -> SentinelConfig | None:
    values: dict[str, object] = {"master": "mymaster", "password": "", "sentinel_password": ""}
    values["db"] = 0
    values.update(kw)
    return sentinel_config(raw, **values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ()),
        (" , ", ()),
        ("s1:26379", (("s1", 26379),)),
        (
            "s1:26379, 10.0.0.2:26380 ,s3.example.internal:1",
            (
                ("s1", 26379),
                ("10.0.0.2", 26380),
                ("s3.example.internal", 1),
            ),
        ),  # fmt: skip
        ("[::1]:26379,[fd00::2]:65535", (("::1", 26379), ("fd00::2", 65535))),
    ],
)
def test_sentinels_are_host_port_pairs_separated_by_commas(raw, expected):
    assert parse_sentinels(raw) == expected


@pytest.mark.parametrize(
    ("raw", "bad"),
    [
        ("x", "x"),
        ("s1", "s1"),
        ("s1:", "s1:"),
        (":26379", ":26379"),
        ("s1:port", "s1:port"),
        ("s1:0", "s1:0"),
        ("s1:65536", "s1:65536"),
        ("s1:-1", "s1:-1"),
        ("s1:26379,s 2:26379", "s 2:26379"),
        ("sentinel://s1:26379", "sentinel://s1:26379"),
        ("s1:26379;s2:26379", "s1:26379;s2:26379"),
    ],
)
def test_an_entry_that_is_not_host_port_is_refused_naming_the_setting(raw, bad):
    with pytest.raises(ImproperlyConfigured) as refused:
        parse_sentinels(raw)
    assert str(refused.value) == f"REDIS_SENTINELS: expected host:port, got {bad!r}"


def test_a_sentinel_listed_twice_is_refused():
    with pytest.raises(ImproperlyConfigured, match="^REDIS_SENTINELS: a sentinel is listed twice"):
        parse_sentinels("s1:26379,s2:26379,s1:26379")


def test_no_sentinels_means_no_sentinel_config():
    assert config("") is None
    assert config("", master="") is None  # the master's name is not read then


@pytest.mark.parametrize("master", ["", "my master", "a/b", "mymaster\n"])
def test_a_bad_master_name_is_refused_naming_the_setting(master):
    with pytest.raises(ImproperlyConfigured) as refused:
        config(master=master)
    assert str(refused.value).startswith("REDIS_SENTINEL_MASTER: expected the master's name")
    assert repr(master) in str(refused.value)


def test_the_broker_url_lists_every_sentinel_for_kombus_sentinel_transport():
    assert config().broker_url() == "sentinel://s1:26379/0;sentinel://s2:26380/0"


def test_the_broker_url_carries_the_masters_password_quoted_and_the_database():
    url = config("s1:1,[::1]:2", password="p@ss:w/rd", db=3).broker_url()
    assert url == "sentinel://:p%40ss%3Aw%2Frd@s1:1/3;sentinel://:p%40ss%3Aw%2Frd@[::1]:2/3"


TIMEOUTS = {"socket_timeout": 3, "socket_connect_timeout": 3, "health_check_interval": 2}


def test_the_transport_options_name_the_master_and_the_sentinels_password():
    assert config(master="takt").transport_options() == {"master_name": "takt", **TIMEOUTS}
    with_password = config(master="takt", sentinel_password="s3cret").transport_options()
    assert with_password == {
        "master_name": "takt",
        **TIMEOUTS,
        "sentinel_kwargs": {"password": "s3cret"},
    }


def test_the_description_for_messages_names_master_and_sentinels_but_no_password():
    setup = config("s1:26379,[::1]:26380", password="pw1", sentinel_password="pw2")
    assert setup.describe() == "master 'mymaster' via sentinels s1:26379, [::1]:26380"
    assert "pw1" not in repr(setup) and "pw2" not in repr(setup)
