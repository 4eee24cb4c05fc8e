"""The model of the fabric shared by the controller and the hosts: topology, routing, the ECMP
hash, Ethereal's planner, collective steps, link loads and the RoCEv2 constants."""
