"""RFC 9457 problem details: one error type and one rendering for every Tidemark API.

Pure: no Django, so the API and the watchdog render errors the same way.
"""

from .core import (
    PROBLEM_CONTENT_TYPE,
    REQUIRED_DETAIL,
    Conflict,
    FieldError,
    FieldWarning,
    NotFound,
    PermissionDenied,
    Problem,
    ValidationProblem,
    choice_detail,
    invalid_choice,
    problem_document,
    required,
)

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "REQUIRED_DETAIL",
    "Conflict",
    "FieldError",
    "FieldWarning",
    "NotFound",
    "PermissionDenied",
    "Problem",
    "ValidationProblem",
    "choice_detail",
    "invalid_choice",
    "problem_document",
    "required",
]
