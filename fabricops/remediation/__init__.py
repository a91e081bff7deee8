"""Remediation: diagnosis -> safe, verified, reversible actions on the fabric."""
