"""``ApplicationError`` types, in one place. Messages and types never carry personal data."""

INVALID_IDENTIFIER = "InvalidIdentifier"
UNKNOWN_APP = "UnknownApp"
UNKNOWN_SCHEMA = "UnknownSchema"
PERMISSION_DENIED = "StorePermissionDenied"
REQUEST_NOT_FOUND = "RequestNotFound"
USER_ID_FORGOTTEN = "UserIdAlreadyForgotten"
VERIFICATION_FAILED = "VerificationFailed"
#: raised non-retryable by the activity itself (not listed below, so recorded retry policies stay as they were)
RECORD_INVALID = "RecordInvalid"
#: a receipt or attestation body the signer refuses (a float, an integer beyond 2^53, a key that is not a string):
#: a bug no retry fixes, so the step fails at once with the field's path (raised non-retryable)
UNSIGNABLE_DOCUMENT = "UnsignableDocument"
#: item forgetting: a legal hold on the subject refuses a destructive forget (raised non-retryable)
LEGAL_HOLD = "LegalHoldActive"
#: the worker's approval gate: no valid approval recorded for the request, or the activity was called from a
#: workflow that is not the request's own (raised non-retryable by the gate)
NOT_APPROVED = "NotApproved"
#: a store of the worker's registry holds the subject's data but the request's plan does not name it
PLAN_INCOMPLETE = "PlanIncomplete"
#: an erasure filed without a plan (by a build before plans existed): the saga that ran its built-in steps is
#: retired, so the build that filed it runs it (raised by the saga itself, which then fails)
PLAN_MISSING = "PlanMissing"

NON_RETRYABLE = (
    INVALID_IDENTIFIER,
    UNKNOWN_APP,
    UNKNOWN_SCHEMA,
    PERMISSION_DENIED,
    REQUEST_NOT_FOUND,
    USER_ID_FORGOTTEN,
)
