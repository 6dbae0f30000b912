"""Suite-wide settings. Speed is measured in bench/, never here, so hypothesis has no deadline
(numba compiles each kernel on first use, which would otherwise trip it)."""

import os

from hypothesis import settings

settings.register_profile("neardup", deadline=None, max_examples=100)
settings.register_profile("thorough", deadline=None, max_examples=2000)
# NEARDUP_HYPOTHESIS_PROFILE=thorough runs 20x more examples.
settings.load_profile(os.environ.get("NEARDUP_HYPOTHESIS_PROFILE", "neardup"))
