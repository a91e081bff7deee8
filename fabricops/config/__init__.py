"""RoCE configuration: intent, per-device plan and per-platform renders.

``intent`` holds the fabric-wide policy (lossless class, PFC and its watchdog,
ECN by port speed, buffer headroom, ECMP, DCQCN), ``devices`` the settings one
switch or host should run, ``plan`` derives both from a topology, and
``render`` writes them for a platform (OpenConfig, SONiC, EOS, NVUE, mlx5
hosts) through the Jinja2 templates in ``templates/``. The package imports
only ``fabricops.core``.
"""
