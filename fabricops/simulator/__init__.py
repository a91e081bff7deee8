"""The simulated RoCE fabric (the twin): topology, workload, forwarding, rates, faults."""
