"""The exceptions and warnings of dexlake.

Every failure of the engine raises a :class:`DexlakeError` subclass carrying the engine's
message; :attr:`DexlakeError.status` is the HTTP status when the service answered an error.
An invalid argument raises :class:`InvalidArgumentError`, which is also a :class:`ValueError`
(arguments of the wrong type raise :class:`TypeError`), each naming the argument.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = [
    "DexlakeError",
    "ServiceError",
    "LakeError",
    "InvalidArgumentError",
    "CoverageError",
    "NoDataError",
    "DexlakeWarning",
    "CoverageWarning",
]


class DexlakeError(Exception):
    """A failure of the engine; the message is the engine's."""

    #: The HTTP status of the service's error answer, when the failure is one (else ``None``).
    status: Optional[int] = None
    #: Raised by ``dexlake.sync``: the per-job report of the run (else ``None``).
    report: Optional[List[Dict[str, Any]]] = None


class ServiceError(DexlakeError):
    """The service answered an error, or could not be reached or understood."""


class LakeError(DexlakeError):
    """The lake is missing, damaged, locked, or a file of it changed; or reading it failed."""


class InvalidArgumentError(DexlakeError, ValueError):
    """An argument, a request member or a configuration value was refused; the message names it."""


class CoverageError(DexlakeError):
    """``strict=True``: the lake's syncs never fetched part of what the answer reads."""


class NoDataError(DexlakeError, LookupError):
    """The lake holds no event for what was asked (a mistyped address, a range before the data)."""


class DexlakeWarning(UserWarning):
    """A note on an answer: for example tokens of a list without events."""


class CoverageWarning(DexlakeWarning):
    """Part of what an answer reads was never fetched by the lake's syncs (``strict=False``)."""
