"""Device agents: the simulated fabric served over real protocols on loopback."""
