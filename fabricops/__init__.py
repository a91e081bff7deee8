"""fabricops: telemetry and automated operations for AI training RoCE fabrics."""

__version__ = "0.1.0"
