"""Pipeline: telemetry from the bus to rates, keyframe segments, events and sampling policy."""
