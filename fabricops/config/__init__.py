"""RoCE configuration: intent, per-device plan and per-platform renders.

``intent`` holds the fabric-wide policy (lossless class, PFC and its watchdog,
ECN by port speed, buffer headroom, ECMP, DCQCN), ``devices`` the settings one
switch or host should run, ``plan`` derives both from a topology, and
``render`` writes them for a platform (OpenConfig, SONiC, EOS, NVUE, mlx5
hosts) through the Jinja2 templates in ``templates/``. ``running`` turns a plan into the
settings devices should run (keys of ``fabricops.core.roce_settings``), ``check`` checks
what a fabric runs as a whole, ``apply`` makes it run the plan through remediation's
safety envelope, ``validate`` judges validation traffic, and ``drift`` watches for
settings that leave their intent. The package imports only ``fabricops.core``; readers,
actuators and the twin are handed in.
"""
