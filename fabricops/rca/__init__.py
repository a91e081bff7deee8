"""Root-cause analysis: detect, localize and classify fabric faults from telemetry."""
