"""Kept only for ``pages/plan.py`` (owned by another change while this split lands): the old
import path of the page context and the editing gate. The code lives in :mod:`ui.context`,
:mod:`ui.sidebar` and :mod:`ui.registry`; import from there. Remove this module once
``pages/plan.py`` imports ``ui.context`` and ``ui.sidebar``."""
from __future__ import annotations

from .context import context, secrets_dict
from .sidebar import editing_gate

__all__ = ["context", "editing_gate", "secrets_dict"]
