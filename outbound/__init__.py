"""Calling other people's endpoints safely: the one sending policy for webhooks and pages.

Pure (no Django, no app imports), so the catalog's delivery worker and the watchdog's pager
share the same rules: an SSRF guard at connect time (and the same rules for a target when
it is registered, ``targets``), timeouts with a total deadline, bounded response reads,
failure classification, backoff, and Standard Webhooks signing; and the one place per
receiving system that shapes user-supplied text for it (``slack``, ``mail``,
``pagerduty``).
"""

from .http import AddressPolicy, AttemptResult, BlockedAddress, Sender
from .policy import REFUSED_ERROR_KINDS, Decision, backoff_delay, classify, parse_retry_after
from .signing import generate_secret, signature_header

__all__ = [
    "REFUSED_ERROR_KINDS",
    "AddressPolicy",
    "AttemptResult",
    "BlockedAddress",
    "Decision",
    "Sender",
    "backoff_delay",
    "classify",
    "generate_secret",
    "parse_retry_after",
    "signature_header",
]
