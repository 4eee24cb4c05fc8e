"""The p4switch device: ports, traffic manager and the `p4switch run` process."""
