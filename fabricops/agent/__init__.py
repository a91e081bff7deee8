"""The host agent: RoCE NIC counters of a GPU server, read where the kernel shows them.

``fabricops agent`` runs on each GPU server. It finds the RDMA devices under
``/sys/class/infiniband``, maps each to its network interface and to the
topology's NIC port (LLDP or explicit names), reads RDMA port counters,
``hw_counters``, ethtool statistics (per-priority PFC pause), link state and
module optics, and publishes one :class:`~fabricops.core.frame.Frame` per
sample with ``source = host``. Every path it reads is below a configurable
root, so a directory tree of recorded files stands in for a real host.

Modules: ``values`` (one file's text to a value), ``ethtool_text`` and
``lldp`` (recorded command outputs), ``names`` (driver counter names to
catalogue metrics), ``discovery`` (devices, interfaces, NIC naming),
``sources`` (reading files and ethtool), ``sampling`` (readings to frame
columns, resets, rates), ``service`` (the loop), ``config``, ``metrics``.
"""
