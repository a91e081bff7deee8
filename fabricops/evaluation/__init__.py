"""Evaluation harness: the only package that may read the twin's ground truth.

Scenario generation, replay through the bus, scoring, model training and the
closed remediation loop. It stands above ``rca`` and ``remediation`` (which see
telemetry only) and below ``cli`` and ``api``.
"""
