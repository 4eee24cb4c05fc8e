"""Job-trace simulation of a multi-tenant GPU cluster: hash ECMP sharing, vClos and OCS-vClos
placing the same trace (SimPy). `python -m sim.jobs`; see README.md."""
