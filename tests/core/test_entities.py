"""Entity ids: construction, splitting, validation, classification."""

from __future__ import annotations

import re

import pytest

from fabricops.core.entities import (
    EntityError,
    EntityKind,
    check_node_id,
    entity_kind,
    link_id,
    port_id,
    split_link,
    split_port,
)


def test_port_id() -> None:
    assert port_id("leaf-0-3", "eth12") == "leaf-0-3:eth12"
    assert port_id("host-017", "nic2") == "host-017:nic2"
    assert port_id("sw.a_1", "Ethernet1/1") == "sw.a_1:Ethernet1/1"


def test_link_ids_are_sorted() -> None:
    a, b = "spine-1:eth3", "leaf-0-3:eth12"
    assert link_id(a, b) == link_id(b, a) == "leaf-0-3:eth12~spine-1:eth3"
    assert split_link(link_id(a, b)) == ("leaf-0-3:eth12", "spine-1:eth3")


def test_split_port() -> None:
    assert split_port("leaf-0-3:eth12") == ("leaf-0-3", "eth12")


@pytest.mark.parametrize("bad", ["leaf-0", ":eth1", "leaf-0:", ""])
def test_split_port_rejects_naming_the_id(bad: str) -> None:
    with pytest.raises(EntityError, match=re.escape(repr(bad))):
        split_port(bad)


@pytest.mark.parametrize("bad", ["leaf-0:eth1", "leaf-0:eth1~spine", "~a:b", "a:b~"])
def test_split_link_rejects_naming_the_id(bad: str) -> None:
    with pytest.raises(EntityError, match="is not of the form"):
        split_link(bad)


@pytest.mark.parametrize("bad", ["", "-leaf", "leaf 0", "leaf:0", "leaf~0", "lé"])
def test_bad_node_ids_raise_naming_the_id(bad: str) -> None:
    with pytest.raises(EntityError, match=re.escape(repr(bad))):
        check_node_id(bad)
    with pytest.raises(EntityError, match=re.escape(repr(bad))):
        port_id(bad, "eth0")


@pytest.mark.parametrize("bad", ["", "eth 0", "eth:0", "eth~0", "/eth"])
def test_bad_interface_names_raise_naming_them(bad: str) -> None:
    with pytest.raises(EntityError, match=re.escape(repr(bad))):
        port_id("leaf-0", bad)


def test_link_id_validates_its_ports() -> None:
    with pytest.raises(EntityError, match="'leaf-0'"):
        link_id("leaf-0", "spine-0:eth1")
    with pytest.raises(EntityError, match="itself"):
        link_id("leaf-0:eth1", "leaf-0:eth1")


def test_check_node_id_returns_it() -> None:
    assert check_node_id("host-017") == "host-017"


@pytest.mark.parametrize(
    ("entity", "kind"),
    [
        ("leaf-0-3", EntityKind.NODE),
        ("host-017", EntityKind.NODE),
        ("leaf-0-3:eth12", EntityKind.PORT),
        ("host-017:nic2", EntityKind.PORT),
        ("leaf-0-3:eth12~spine-1:eth3", EntityKind.LINK),
        ("job-llm-01", EntityKind.JOB),
    ],
)
def test_entity_kind(entity: str, kind: EntityKind) -> None:
    assert entity_kind(entity) is kind
