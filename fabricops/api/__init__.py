"""The REST API, Prometheus metrics and outgoing alerts of a running fabricops."""
