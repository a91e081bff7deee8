"""Topology discovery from LLDP: devices' neighbour tables in, a topology document out.

Pure parts (``snmp_rows``, ``gnmi_rows``, ``links``, ``tiers``, ``cabling_diff``)
turn what devices report into links, tiers and a ``Topology``; thin transports
(``snmp_source``, ``gnmi_source``) fetch the reports over the collectors' own
SNMP and gNMI clients; ``service`` runs the whole and ``summary`` shows it.
"""
