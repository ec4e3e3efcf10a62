"""The "coopjit" logger (logging): what coopjit decides and does, for applications that configure
logging. coopjit adds only a NullHandler; COOPJIT_DEBUG (which also makes the C++ core print its
stages to stderr) sets the logger to DEBUG with a stderr handler when the application gave it none.

DEBUG: each kernel compiled or loaded (problem, plan, where it came from, milliseconds);
INFO: tuning results (the winner and its speed-up) and cache clears."""
from __future__ import annotations

import logging
import os

logger = logging.getLogger("coopjit")
logger.addHandler(logging.NullHandler())
if os.environ.get("COOPJIT_DEBUG", "").strip() not in ("", "0"):
    logger.setLevel(logging.DEBUG)
    if not any(not isinstance(h, logging.NullHandler) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("coopjit %(levelname)s: %(message)s"))
        logger.addHandler(handler)
