"""A judge calibrated against human labels: reading the labels (``_labels``), the agreement
statistics (``_stats``), the run (``_calibrate``) and the gates that need a calibration
(``_gates``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi.core import lazy_exports

if TYPE_CHECKING:
    from evalsi.runs.calibration._calibrate import CalibrationResult, calibrate_async
    from evalsi.runs.calibration._gates import uncalibrated_gates

__all__ = [
    "CalibrationResult",
    "calibrate_async",
    "uncalibrated_gates",
]

# Imported on first use (core/_lazy.py).
__getattr__ = lazy_exports(__name__, __file__)
