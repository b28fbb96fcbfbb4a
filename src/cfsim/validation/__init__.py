"""Validation and calibration of the model against lab exports.

:func:`validate` compares each run's simulated twin with what the real kernel and Go runtime did;
:func:`calibrate` fits the parameters the stories do not state on a training subset of runs and
reports the errors on the others.
"""
from cfsim.validation.report import ValidationReport, validate, validate_each, write_report

__all__ = ["ValidationReport", "validate", "validate_each", "write_report", "calibrate"]


def calibrate(*args, **kwargs):
    from cfsim.validation.calibrate import calibrate as _calibrate

    return _calibrate(*args, **kwargs)
