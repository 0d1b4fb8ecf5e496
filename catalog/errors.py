"""The catalog's problems, each with a stable code (rendered by api/ as RFC 9457)."""

from problems import Conflict, NotFound, PermissionDenied, Problem


class DatasetNotFound(NotFound):
    """No registered dataset has this identity (or id). Named by namespace and name,
    ``errors[]`` says which is wrong: ``namespace`` (rule ``namespace_unknown``: no dataset
    has it) or ``name`` (``name_unknown``); ``suggestion`` (``{namespace, name}``), when
    present, is the closest registered identity the caller may use."""

    code = "dataset_not_found"
    title = "Dataset not found"


class TeamNotFound(NotFound):
    code = "team_not_found"
    title = "Team not found"


class SubscriptionNotFound(NotFound):
    code = "subscription_not_found"
    title = "Subscription not found"


class EventTypeNotFound(NotFound):
    """Tidemark sends no notification of this type; ``known`` lists the types it sends
    (``GET /api/v1/event-types``)."""

    code = "event_type_not_found"
    title = "Event type not found"


class SubscriptionExists(Conflict):
    """The team already declared this dataset (and job) with another webhook endpoint; a
    declaration never moves a subscription to a new URL. ``existing`` names it (``id``,
    ``endpoint_url``, and ``endpoints_path``): to deliver to another URL as well, add an
    endpoint to it (``POST /api/v1/subscriptions/{id}/endpoints``); to move it, add the
    new one and remove the old one (``DELETE .../endpoints/{endpoint_id}``)."""

    code = "subscription_exists"
    title = "The team already has this subscription, with another endpoint"


class DatasetExists(Conflict):
    code = "dataset_exists"
    title = "A dataset with this namespace and name already exists"


class NotDatasetOwner(PermissionDenied):
    code = "not_dataset_owner"
    title = "Only the dataset's owner team may do this"


class PublishNotAllowed(PermissionDenied):
    code = "publish_not_allowed"
    title = "This key may not publish readiness for this dataset"


class DatasetRetired(Conflict):
    code = "dataset_retired"
    title = "The dataset is retired"


class RevisionAlreadyReady(Conflict):
    code = "revision_already_ready"
    title = "This revision is already ready"


class InvalidPartitionKey(Problem):
    code = "invalid_partition_key"
    title = "The partition key does not match the dataset's partitioning"
    status = 400


class PartitionInFuture(Problem):
    code = "partition_in_future"
    title = "The partition's period has not started"
    status = 422


class IdempotencyKeyReused(Problem):
    code = "idempotency_key_reused"
    title = "The Idempotency-Key was already used with a different request"
    status = 422


class IdempotencyKeyInProgress(Conflict):
    code = "idempotency_key_in_progress"
    title = "A request with this Idempotency-Key is still being processed"


class InvalidIdempotencyKey(Problem):
    code = "invalid_idempotency_key"
    title = "The Idempotency-Key header is not valid"
    status = 400


class PartitionNotFound(NotFound):
    code = "partition_not_found"
    title = "Partition not found"


class ScopeNotHeld(PermissionDenied):
    code = "scope_not_held"
    title = "A key can only grant scopes it holds"


class ApiKeyNotFound(NotFound):
    code = "api_key_not_found"
    title = "API key not found"


class PartitioningLocked(Conflict):
    code = "partitioning_locked"
    title = "Partitioning cannot change once partitions exist"


class NotADeadLetter(Conflict):
    code = "not_a_dead_letter"
    title = "Only rejected or dead deliveries can be replayed"


class DeliveryNotFound(NotFound):
    code = "delivery_not_found"
    title = "Delivery not found"


class EndpointNotFound(NotFound):
    code = "endpoint_not_found"
    title = "Endpoint not found"


class EndpointHasNoSecret(Conflict):
    """Only webhook endpoints sign what they send; a team's contact (email, Slack) and the
    watchdog have no signing secret to rotate. ``endpoint_kind`` names the endpoint's kind."""

    code = "endpoint_has_no_secret"
    title = "Only webhook endpoints have a signing secret"


class EndpointDisabled(Conflict):
    """The endpoint is disabled, so nothing is sent to it: a recovery would only queue
    deliveries that wait. Enable it first (``POST /api/v1/endpoints/{id}/enable``, which
    also sends what waited while it was disabled), then recover. ``disabled_reason`` says
    why it was disabled."""

    code = "endpoint_disabled"
    title = "The endpoint is disabled; enable it first"


class RecoverSinceOutOfRange(Problem):
    """A recovery's ``since`` is later than now, or earlier than the recovery window
    (``TIDEMARK_RECOVER_WINDOW_DAYS``, 14 by default, and never longer than dead letters
    are kept). ``earliest_since`` is the earliest time accepted now; ``errors[]`` names
    ``since``."""

    code = "recover_since_out_of_range"
    title = "Deliveries are recovered only from a bounded window before now"
    status = 422


class ChangeNoticeNotFound(NotFound):
    code = "change_notice_not_found"
    title = "Change notice not found"


class NoticePeriodTooShort(Problem):
    code = "notice_period_too_short"
    title = "The change takes effect sooner than the dataset's notice period allows"
    status = 422


class NotAConsumer(PermissionDenied):
    code = "not_a_consumer"
    title = "Only a consumer team of the dataset may do this"


class ChangeNoticeInEffect(Conflict):
    code = "change_notice_in_effect"
    title = "The change notice has already taken effect"


class AcknowledgementsNotRequired(Conflict):
    code = "acknowledgements_not_required"
    title = "Only a notice that requires acknowledgements may take effect early"


class AcknowledgementsPending(Conflict):
    code = "acknowledgements_pending"
    title = "Not every consumer team has acknowledged the change notice"


class SunsetTooSoon(Problem):
    code = "sunset_too_soon"
    title = "The sunset is sooner than the dataset's notice period allows"
    status = 422


class LifecycleNoticeRequired(Conflict):
    code = "lifecycle_notice_required"
    title = "This lifecycle change needs a change notice that has taken effect"


class ClaimTaken(Conflict):
    code = "claim_taken"
    title = "Another team already claims this"


class ClaimNotFound(NotFound):
    code = "claim_not_found"
    title = "Claim not found"


class ClaimOverDatasets(Conflict):
    code = "claim_over_datasets"
    title = "Other teams own datasets under this prefix"


class PrefixClaimed(Conflict):
    code = "prefix_claimed"
    title = "Another team claims this dataset prefix"


class TransferNotFound(NotFound):
    code = "transfer_not_found"
    title = "Transfer not found"


class TransferPending(Conflict):
    code = "transfer_pending"
    title = "The dataset already has an open transfer"


class TransferClosed(Conflict):
    code = "transfer_closed"
    title = "The transfer was already accepted or cancelled"


class RestatementNotFound(NotFound):
    code = "restatement_not_found"
    title = "Restatement not found"


class RestatementExists(Conflict):
    code = "restatement_exists"
    title = "The dataset already has a restatement (or a revision) with this version"


class InvalidRestatementRange(Problem):
    code = "invalid_restatement_range"
    title = "The restatement's range of partitions is not valid"
    status = 422


class RestatementClosed(Conflict):
    code = "restatement_closed"
    title = "The restatement is no longer staged"


class PartitionOutsideRestatement(Problem):
    code = "partition_outside_restatement"
    title = "The partition is not inside the restatement's range"
    status = 422


class RestatementIncomplete(Conflict):
    code = "restatement_incomplete"
    title = "Not every partition of the restatement is ready"


class RevisionStaged(Conflict):
    code = "revision_staged"
    title = "This version is staged in a restatement"


class DeclarationForAnotherTeam(PermissionDenied):
    code = "declaration_for_another_team"
    title = "The declaration names another team"


class JobNamespaceOfAnotherTeam(PermissionDenied):
    code = "job_namespace_of_another_team"
    title = "The job belongs to another team"


class LineageNodeNotFound(NotFound):
    """The lineage graph's root: a dataset neither registered nor seen, or an unseen job.
    For a dataset, ``errors[]`` and ``suggestion`` are as for ``dataset-not-found``."""

    code = "lineage_node_not_found"
    title = "No such dataset or job in lineage"


class SchemaInvalid(Problem):
    code = "schema_invalid"
    title = "The schema is not valid"
    status = 400
