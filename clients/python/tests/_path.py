"""Puts ../src first on sys.path: the tests run the package's source, with or without PYTHONPATH=src."""

import os
import sys

_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)
