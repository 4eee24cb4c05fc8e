"""The demo's script modules (mininet/demo.py and its siblings), imported as the script
imports them: mininet/ first on sys.path, which then is left as it was."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

MININET_DIR = Path(__file__).resolve().parents[1] / "mininet"


def demo_modules(*names: str) -> list:
    """The modules `names` of mininet/ (e.g. "demo", "demo_options")."""
    sys.path.insert(0, str(MININET_DIR))
    try:
        return [importlib.import_module(n) for n in names]
    finally:
        sys.path.remove(str(MININET_DIR))
