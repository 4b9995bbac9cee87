"""The probe families. Importing this package registers every probe (see `rewards.audit.registry`).

One module per family: sanity, bypass (trivial policies), parser, length, judge (master keys), tools (trajectory
rewards and environments), composition (shaped rewards), robustness (false negatives).
"""

from rewards.audit.probes import bypass, composition, judge, length, parser, robustness, sanity, tools  # noqa: F401
