"""``delta.exceptions``: delta-spark's names for a lost commit race.

lakefeed commits through delta-rs, which reports every lost race the same way; lakefeed raises
it as :class:`~lakefeed.core.errors.ConflictError` (code ``CONFLICT``, worth a retry). Each of
delta-spark's names is that class, so ``except ConcurrentAppendException:`` around a write
catches the conflicts delta-spark would sort into its subclasses.
"""

from lakefeed.core.errors import ConflictError

DeltaConcurrentModificationException = ConflictError
ConcurrentWriteException = ConflictError
MetadataChangedException = ConflictError
ProtocolChangedException = ConflictError
ConcurrentAppendException = ConflictError
ConcurrentDeleteReadException = ConflictError
ConcurrentDeleteDeleteException = ConflictError
ConcurrentTransactionException = ConflictError

__all__ = [
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "DeltaConcurrentModificationException",
    "MetadataChangedException",
    "ProtocolChangedException",
]
