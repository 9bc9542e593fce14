"""Errors of the store layer.

StoreError
├── InvalidIdentifier      an app, user or session id that can never be valid (non-retryable)
├── UnknownSchema          a google-adk schema version this code does not know (non-retryable)
├── DataKeyShredded        a ciphertext whose data key no longer exists (crypto-shredded)
├── CiphertextInvalid      bytes that are not one of our ciphertexts, or were tampered with
├── RequestNotFound        no erasure request with that id
├── RecordInvalid          a request record of an unknown version or shape (non-retryable)
├── NotApproved            no valid approval recorded for a request about to change data (non-retryable)
├── PartialDelete          a batch delete whose reply listed keys it did not delete (retried)
└── CompactionIncomplete   volumes holding deleted objects the object store did not compact (retried)
"""


class StoreError(Exception):
    """Base of every error raised by ``stores``."""


class InvalidIdentifier(StoreError):
    """An identifier that can never be valid; the message never repeats the identifier itself."""


class UnknownSchema(StoreError):
    """The database holds a google-adk session schema version this code does not know."""


class DataKeyShredded(StoreError):
    """The data key of this ciphertext was destroyed: the data is unreadable by design."""


class CiphertextInvalid(StoreError):
    """Not a ciphertext of ours, or it failed authentication."""


class RequestNotFound(StoreError):
    """No erasure request with that id."""


class RecordInvalid(StoreError):
    """A request's recorded state this code cannot read (unknown version or field): refused, never half-read."""


class NotApproved(StoreError):
    """No valid approval is recorded for the request (missing, denied, not verifying, another subject)."""


class PartialDelete(StoreError):
    """A ``DeleteObjects`` reply listed keys it did not delete: a failure to retry, never a success."""


class CompactionIncomplete(StoreError):
    """Volumes holding deleted objects stayed uncompacted (another vacuum running, a replica away): retried."""
