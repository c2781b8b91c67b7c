"""The exceptions and warnings of dexlake.

Every failure of the engine raises a :class:`DexlakeError` subclass carrying the engine's
message; :attr:`DexlakeError.status` is the HTTP status when the service answered an error.
The class says what kind of failure it is, the same kind that chooses the ``dexlake``
command's exit status:

=====================================================  ==============================  ====
failure                                                exception                       exit
=====================================================  ==============================  ====
an invalid argument, request member or configuration   :class:`InvalidArgumentError`   2
nothing in the lake matched what was asked              :class:`NoDataError`            3
``strict=True``: the lake does not cover the answer     :class:`CoverageError`          4
a committed file missing, damaged or replaced           :class:`DamagedLakeError`       5
the service refused, failed or could not be reached     :class:`ServiceError`           6
another writer holds the lake                           :class:`LakeBusyError`          7
interrupted before the work finished                    :class:`DexlakeInterrupted`     130
any other failure of the lake or the file system        :class:`LakeError`              1
anything else                                           :class:`DexlakeError`           1
=====================================================  ==============================  ====

:class:`InvalidArgumentError` is also a :class:`ValueError` (arguments of the wrong type raise
:class:`TypeError`), each naming the argument; a damaged lake is a :class:`LakeError`, never a
:class:`ValueError`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = [
    "DexlakeError",
    "ServiceError",
    "LakeError",
    "DamagedLakeError",
    "LakeBusyError",
    "DexlakeInterrupted",
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
    """The lake is missing, damaged or locked, or reading or writing it failed."""


class DamagedLakeError(LakeError):
    """A committed file of the lake is missing, damaged or was replaced (the message names it),
    or the lake's manifest or commit journal does not decode: ``dexlake verify`` lists every
    such file."""


class LakeBusyError(LakeError):
    """Another writer holds the lake's lock, or committed the same version first."""


class DexlakeInterrupted(DexlakeError):
    """The work was cancelled before it finished; what it committed stays."""


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
