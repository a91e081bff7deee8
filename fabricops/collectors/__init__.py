"""Collectors: SNMP poller, gNMI subscriber, INT report receiver.

Each turns protocol data into records and hands them to an injected sink; they
never import the pipeline and meet it only on the bus.
"""
