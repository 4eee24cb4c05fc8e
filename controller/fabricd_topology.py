"""A topology a client sends (SetTopology), screened before fabricd's lock is taken: YAML
without aliases (a few hundred bytes of nested aliases expand to gigabytes), and the size the
description asks for computed from its numbers before anything is built (a schema-valid
16,383 leaves x 252 hosts took minutes and gigabytes to build). Only a description that
passes reaches the model's own validation, and that too runs outside the lock."""
from __future__ import annotations

import yaml

from controller.intent import IntentError, parse_topology
from fabricmodel.topology import Topology

MAX_SWITCHES = 1024
MAX_HOSTS = 4096
MAX_LINKS = 16384


class _NoAliases(yaml.SafeLoader):
    """SafeLoader refusing every alias (`*name`): a topology description never needs one."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "YAML aliases are not accepted", mark)
        return super().compose_node(parent, index)


def _count(value) -> int:
    """A size field as the schema will read it; anything else counts as 0 here and is left
    for the schema to refuse."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def sizes(data: dict) -> tuple[int, int, int]:
    """(switches, hosts, links) a description asks for, from its numbers alone."""
    if data.get("kind") == "fat-tree":
        k = _count(data.get("k"))
        return 5 * k * k // 4, k ** 3 // 4, k ** 3 // 2 + k ** 3 // 4
    leaves, spines = _count(data.get("leaves")), _count(data.get("spines"))
    hosts = leaves * _count(data.get("hosts_per_leaf"))
    return leaves + spines, hosts, hosts + leaves * spines * max(_count(
        data.get("parallel_links", 1)), 1)


def screen(text: str) -> Topology:
    """The topology `text` describes, or IntentError."""
    try:
        data = yaml.load(text, Loader=_NoAliases)       # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        raise IntentError("INVALID_ARGUMENT", f"<request>: malformed YAML: {err}") from None
    if not isinstance(data, dict):
        raise IntentError("INVALID_ARGUMENT", "<request>: expected a mapping at the top level")
    n_switches, hosts, links = sizes(data)
    if n_switches > MAX_SWITCHES or hosts > MAX_HOSTS or links > MAX_LINKS:
        raise IntentError("INVALID_ARGUMENT", f"the topology asks for {n_switches} switches, "
                          f"{hosts} hosts and {links} links: fabricd takes at most "
                          f"{MAX_SWITCHES}, {MAX_HOSTS} and {MAX_LINKS}")
    return parse_topology(text, "<request>")
