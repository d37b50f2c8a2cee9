// The one registry of every error code of the nodus API.
//
// The spec lists 73 registered codes (the `reason` of a Status body) but
// leaves their HTTP status and meaning to the implementation. This module
// fixes both, once: the HTTP status, a one-sentence summary (docs page and
// default `message`), a default `fix`, whether a later retry of the same
// request can succeed, and the client-library error class each code maps to.
// Everything else (Status bodies, docs pages, the client table) reads it from
// here. Statuses follow Kubernetes where it has the same reason, 402 for every
// billing refusal, 409 for a conflict with the state of one object, 422 for a
// well-formed request that the rules reject, and 503 (with retryAfterSeconds)
// for "try later" conditions.

/** The client-library error classes of the spec's "Client library errors" table. */
export type ClientErrorName =
  | "ConfigurationError"
  | "AuthenticationError"
  | "SignatureError"
  | "ValidationError"
  | "IdempotencyConflictError"
  | "NotFoundError"
  | "BudgetExceededError"
  | "SpendCheckUnavailableError"
  | "RateLimitError"
  | "CapacityUnavailableError"
  | "APIConnectionError"
  | "APITimeoutError"
  | "AssetInUseError"
  | "APIError"

/** Everything the API says about one registered error code. */
export interface ErrorCodeInfo {
  /** The one HTTP status for this code. */
  readonly httpStatus: number
  /** One sentence: what it means (shown on the docs page, and as a default message). */
  readonly summary: string
  /** Default "what to do next": a field to change, a command, a wait. */
  readonly fix: string
  /** True when retrying the same request later can succeed (the client backs off). */
  readonly retryable: boolean
  /** The client-library error class from the spec's table that this code maps to. */
  readonly clientError: ClientErrorName
}

/**
 * Every registered error code, in the spec's order (alphabetical, ignoring
 * case), with its HTTP status, summary, fix, retryability and client error.
 */
export const errorCodes = {
  AdmissionsPaused: {
    httpStatus: 503,
    summary: "The service has temporarily paused admitting new workloads, so nothing was created.",
    fix:
      "Retry after `details.retryAfterSeconds` with the same Idempotency-Key; existing objects keep running and can still be read, changed and deleted.",
    retryable: true,
    clientError: "CapacityUnavailableError"
  },
  AgentGroupClosed: {
    httpStatus: 409,
    summary: "The AgentGroup admits no new member runs because it is sealed, being canceled or already finished.",
    fix:
      "Create a new AgentGroup for further tasks (`spec.sealed` only moves from false to true), or submit the AgentRun without `spec.group`.",
    retryable: false,
    clientError: "APIError"
  },
  AgentGroupFull: {
    httpStatus: 409,
    summary:
      "The AgentGroup already holds `spec.limits.maxPending` unfinished member runs, so it admits no more until some finish.",
    fix:
      "Wait for member runs to finish and retry, or raise the AgentGroup's `spec.limits.maxPending` (at most 10000).",
    retryable: true,
    clientError: "APIError"
  },
  AgentRunFinished: {
    httpStatus: 409,
    summary: "The AgentRun has reached a terminal phase and accepts no more messages or state changes.",
    fix:
      "Start a new AgentRun of the same Agent with the follow-up as its `spec.input`; set `spec.keepAlive: true` on a run that should wait for further messages.",
    retryable: false,
    clientError: "APIError"
  },
  AgentStopped: {
    httpStatus: 409,
    summary: "The Agent is stopped, so it cannot start new AgentRuns or take further turns.",
    fix:
      "Set the Agent's `spec.state` back to Running, or name another Agent (or catalog template) in `spec.agent`, then retry.",
    retryable: false,
    clientError: "APIError"
  },
  AlreadyExists: {
    httpStatus: 409,
    summary:
      "An object of this kind with the same name already exists in the project (or in the cluster, for a cluster-scoped kind).",
    fix:
      "Pick another `metadata.name` or use `metadata.generateName`; to change the existing object replace or patch it instead, and to retry a create safely resend it with the same Idempotency-Key.",
    retryable: false,
    clientError: "APIError"
  },
  ArrearsOutstanding: {
    httpStatus: 402,
    summary: "A charge exceeded the balance and the organization owes arrears, so new work waits until they are paid.",
    fix:
      "Create a TopUp that covers the arrears shown in the message; new work is admitted again once the balance is no longer negative.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  BadRequest: {
    httpStatus: 400,
    summary:
      "The request could not be read: the body is not valid JSON, a required part is missing, or a query parameter is malformed.",
    fix:
      "Send a JSON object whose `apiVersion` and `kind` match the path, with `metadata` and `spec`, and check query values such as `dryRun=All`; the message names the part that failed.",
    retryable: false,
    clientError: "ValidationError"
  },
  BudgetExceeded: {
    httpStatus: 402,
    summary: "A Budget that matches this request would be exceeded by its hold, so the Budget refused the new run.",
    fix:
      "Raise the matching Budget's limit, or lower the request's hold: fewer parallel slots, a cheaper offering, or a lower maxCostUSD; `status.estimate.blockingReasons` names the Budget and the amounts.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  CapacityUnavailable: {
    httpStatus: 503,
    summary: "No capacity matching the request became available within `placement.queueTimeout`.",
    fix:
      "Relax the constraints: widen `placement.regions`, accept more `resources.gpu.type` variants, set `placement.interruptible` to Allow, raise `placement.maxRateUSDPerHour`, or raise `placement.queueTimeout` (0s waits forever); then retry.",
    retryable: true,
    clientError: "CapacityUnavailableError"
  },
  CloudAccountCredentialsRejected: {
    httpStatus: 422,
    summary: "The cloud provider rejected the credentials of the CloudAccount.",
    fix:
      "Check that the credentials are current and grant the permissions the CloudAccount needs, update them on the CloudAccount, and retry.",
    retryable: false,
    clientError: "ValidationError"
  },
  CloudAccountInUse: {
    httpStatus: 409,
    summary: "The CloudAccount cannot be deleted while Pools or running workloads still use it.",
    fix:
      "Delete the Pools that use it and finish or cancel the workloads running on its capacity, then delete the CloudAccount again.",
    retryable: false,
    clientError: "AssetInUseError"
  },
  CloudAccountNotVerified: {
    httpStatus: 409,
    summary: "The CloudAccount has not passed verification, so it cannot be used for pools or placement yet.",
    fix:
      "Read the CloudAccount's status conditions: wait for verification to finish, or fix the credentials or permissions its message names, then retry.",
    retryable: false,
    clientError: "APIError"
  },
  CloudConnectUnavailable: {
    httpStatus: 503,
    summary: "Connecting cloud accounts is temporarily unavailable.",
    fix: "Retry after `details.retryAfterSeconds` with the same Idempotency-Key; nothing was changed by this request.",
    retryable: true,
    clientError: "APIError"
  },
  CloudExecuteNotEnabled: {
    httpStatus: 422,
    summary: "The CloudAccount is connected, but running workloads on it has not been enabled.",
    fix:
      "Enable execution on the CloudAccount (grant it the compute permissions and turn execution on), or place the workload on market capacity or another Pool.",
    retryable: false,
    clientError: "ValidationError"
  },
  CloudUnreachable: {
    httpStatus: 503,
    summary: "The service could not reach the cloud provider's API for this CloudAccount.",
    fix:
      "Retry after `details.retryAfterSeconds`; if it persists, check the provider's status page and that API access for the account has not been restricted.",
    retryable: true,
    clientError: "APIError"
  },
  ComputeSuspended: {
    httpStatus: 403,
    summary: "Compute has been suspended for this organization, so no workload can start.",
    fix:
      "Contact support quoting the requestId to learn why and have the suspension lifted; existing objects can still be read and deleted.",
    retryable: false,
    clientError: "APIError"
  },
  Conflict: {
    httpStatus: 409,
    summary: "The object changed since it was read: the request's `metadata.resourceVersion` is not the current one.",
    fix:
      "Read the object again, re-apply your change to the fresh copy and resend it, or send a merge patch without `metadata.resourceVersion`.",
    retryable: false,
    clientError: "APIError"
  },
  ConnectionNotReady: {
    httpStatus: 409,
    summary: "A Connection the request uses is not Ready, so its env and egress hosts cannot be injected yet.",
    fix:
      "Wait for the Connection to become Ready and retry; if it reports a failure, fix its credentials or endpoint first.",
    retryable: true,
    clientError: "APIError"
  },
  EncryptionFailed: {
    httpStatus: 500,
    summary: "The service could not encrypt the secret material of the request, so nothing was stored.",
    fix:
      "Retry the same request with the same Idempotency-Key; if it keeps failing, contact support quoting the requestId.",
    retryable: true,
    clientError: "APIError"
  },
  EnrollmentTokenInvalid: {
    httpStatus: 401,
    summary: "The enrollment token presented by the host is unknown, expired or revoked.",
    fix:
      "Create a new EnrollmentToken in the Pool's project and enroll the host with it; a deleted or expired token cannot be reused.",
    retryable: false,
    clientError: "AuthenticationError"
  },
  EnvironmentTasksFailed: {
    httpStatus: 422,
    summary: "The Environment's tasks command failed or wrote no valid tasks, so no tasks could be drawn from it.",
    fix:
      "Run the tasks command locally with `--split <train|test> --seed <N>`, check that it exits 0 and writes JSONL lines `{taskId, prompt, metadata}`, then publish a fixed `spec.version` and reference it.",
    retryable: false,
    clientError: "ValidationError"
  },
  Expired: {
    httpStatus: 410,
    summary:
      "The `continue` token, `resourceVersion` or delivery the request refers to is older than the history the service keeps.",
    fix:
      "Start again from a fresh list without `continue`, and watch from that list's `metadata.resourceVersion`; deliveries can be replayed only within the 7 days their log is kept.",
    retryable: false,
    clientError: "APIError"
  },
  FieldImmutable: {
    httpStatus: 422,
    summary: "The update changes a field that the kind declares immutable after create.",
    fix:
      "Only the fields the kind lists as mutable can change after create; delete and re-create the object to change this field.",
    retryable: false,
    clientError: "ValidationError"
  },
  FileTooLarge: {
    httpStatus: 413,
    summary: "The file in a Sandbox file transfer, or the body of a blob upload, is larger than the endpoint accepts.",
    fix:
      "Move large files through the blob transfer endpoint instead (upload it, then reference it as `sha256:<hex>`), or split the file; the message gives the limit.",
    retryable: false,
    clientError: "ValidationError"
  },
  Forbidden: {
    httpStatus: 403,
    summary: "The API key is valid but lacks the scope or project access this operation needs.",
    fix:
      "Use a key or service account that has the scope named in the message (for example billing:write) and access to this project; an organization admin can grant it.",
    retryable: false,
    clientError: "APIError"
  },
  FunctionCallBatchTooLarge: {
    httpStatus: 413,
    summary: "A map batch carries more than 1,000 FunctionCalls in one request.",
    fix:
      "Split the inputs into batches of at most 1,000 calls per request, keeping the same `spec.mapId` so they stay one map.",
    retryable: false,
    clientError: "ValidationError"
  },
  FunctionNotFound: {
    httpStatus: 404,
    summary: "The FunctionCall's `spec.function` names no Function in the project.",
    fix:
      "Check the Function's name and project (`kubectl get functions -n <project>`), or deploy the Function before calling it.",
    retryable: false,
    clientError: "NotFoundError"
  },
  IdempotencyKeyReused: {
    httpStatus: 409,
    summary: "The Idempotency-Key was already used for a request with a different payload.",
    fix:
      "Resend the original payload with this key to get the original result, or assign a new Idempotency-Key to the new request.",
    retryable: false,
    clientError: "IdempotencyConflictError"
  },
  ImageBuildUnavailable: {
    httpStatus: 503,
    summary: "The image build service is temporarily unavailable, so the image cannot be built now.",
    fix: "Retry after `details.retryAfterSeconds`, or use a prebuilt image pinned by digest in `spec.image`.",
    retryable: true,
    clientError: "APIError"
  },
  ImageNotFound: {
    httpStatus: 404,
    summary: "The image reference names neither an Image object of the project nor a tag or digest the registry has.",
    fix:
      "Check the spelling, tag and digest of `spec.image`, that the tag was pushed, and for a private registry that `imagePullSecrets` name a Secret with access.",
    retryable: false,
    clientError: "NotFoundError"
  },
  ImageNotReady: {
    httpStatus: 409,
    summary: "The referenced Image has not finished building, so it has no digest to pin yet.",
    fix: "Wait until the Image is Ready (watch it) and retry; if its build failed, fix the build and run it again.",
    retryable: true,
    clientError: "APIError"
  },
  ImagePullFailed: {
    httpStatus: 422,
    summary:
      "The service could not pull or resolve the image because the registry refused access or returned an error.",
    fix:
      "Check that `imagePullSecrets` names a Secret with valid credentials for the registry and that the registry is reachable from the internet, then retry.",
    retryable: false,
    clientError: "ValidationError"
  },
  InsufficientCredits: {
    httpStatus: 402,
    summary: "The request's hold would exceed the organization's available credit balance.",
    fix:
      "Add credits (create a TopUp) or lower the request's hold: fewer parallel slots, a cheaper offering, or a lower maxCostUSD; `status.estimate.blockingReasons` shows the amounts.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  InternalError: {
    httpStatus: 500,
    summary: "The service hit an unexpected error while handling the request.",
    fix: "Retry with the same Idempotency-Key; if it persists, contact support quoting the requestId.",
    retryable: true,
    clientError: "APIError"
  },
  Invalid: {
    httpStatus: 422,
    summary:
      "The object failed validation: one or more fields break the kind's rules or limits, as listed in `details.causes`.",
    fix:
      "Correct each field named in `details.causes` (its message states the rule) and resend; a create with `dryRun=All` validates without creating, and a Function caller must run the Python minor version in `spec.python`.",
    retryable: false,
    clientError: "ValidationError"
  },
  MethodNotAllowed: {
    httpStatus: 405,
    summary: "The kind does not support this operation.",
    fix:
      "Use an operation the kind offers: attempts, offerings, models, creditgrants and marketplacecontracts are read-only, topups can only be listed, created and read, and enrollmenttokens cannot be replaced or patched.",
    retryable: false,
    clientError: "APIError"
  },
  NoSSHKey: {
    httpStatus: 422,
    summary:
      "No SSH key may log in to the Workspace: none is registered by the members who may use the project, or none named in `spec.sshKeys` exists.",
    fix:
      "Register an SSHKey with your public key, then list it in the Workspace's `spec.sshKeys` or leave `spec.sshKeys` empty so every key of the organization's members may log in.",
    retryable: false,
    clientError: "ValidationError"
  },
  NotFound: {
    httpStatus: 404,
    summary: "The object named in the path does not exist in this project, or it has been deleted.",
    fix:
      "Check the kind, the name and the project (`namespace`) in the path; `kubectl get <plural> -n <project>` lists what exists.",
    retryable: false,
    clientError: "NotFoundError"
  },
  OutputIndexRequired: {
    httpStatus: 422,
    summary: "The Job has several completion indexes, so a reference to its output must say which index it means.",
    fix: "Set `index` in the output reference to one of the Job's `status.completedIndexes` and resend.",
    retryable: false,
    clientError: "ValidationError"
  },
  OutputNotFound: {
    httpStatus: 404,
    summary: "The Job has no committed output of that name for that index.",
    fix:
      "Check the name and index against the Job's `status.outputs`; outputs are collected only when an index succeeds, so wait for it to succeed.",
    retryable: false,
    clientError: "NotFoundError"
  },
  PaymentDisputed: {
    httpStatus: 402,
    summary: "A payment of the organization is disputed, so new work is paused until the dispute closes.",
    fix:
      "Resolve or withdraw the dispute with your card issuer; new work is admitted again when it closes (event billing.dispute_closed).",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  PaymentMethodRequired: {
    httpStatus: 402,
    summary:
      "The organization has no payment method on file, which this work requires even while starter credits remain.",
    fix: "Add a card to the organization's billing settings, then retry; starter credits do not lift this requirement.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  PaymentVerificationUnavailable: {
    httpStatus: 503,
    summary:
      "Spending authorization is temporarily unavailable because the payment provider could not be reached to verify payment.",
    fix: "Retry after `details.retryAfterSeconds` with the same Idempotency-Key, so the submission is not duplicated.",
    retryable: true,
    clientError: "SpendCheckUnavailableError"
  },
  PaymentsNotConfigured: {
    httpStatus: 501,
    summary: "This deployment has no payment provider configured, so it cannot take payments such as TopUps.",
    fix:
      "Ask the operator to configure payments for this deployment; until then credits come only from CreditGrants the operator issues.",
    retryable: false,
    clientError: "APIError"
  },
  PoolActPaused: {
    httpStatus: 409,
    summary: "The Pool's act kill switch (`spec.act.paused`) is on, so its actions cannot be approved or run.",
    fix:
      "Set the Pool's `spec.act.paused` to false (with `spec.act.mode` Propose or Auto), then act on the PoolAction again.",
    retryable: false,
    clientError: "APIError"
  },
  PoolActionNotPending: {
    httpStatus: 409,
    summary: "The PoolAction is no longer pending, so it cannot be approved or rejected.",
    fix:
      "Read the PoolAction again to see what happened to it, and act only on actions that are still pending (`kubectl get poolactions -n <project>`).",
    retryable: false,
    clientError: "APIError"
  },
  PoolActionNotReversible: {
    httpStatus: 409,
    summary: "The PoolAction's effect cannot be undone through the API.",
    fix:
      "Undo its effect by hand (for example patch drained Nodes back into service), and change the Pool's `spec.act.policies` if it should not be proposed again.",
    retryable: false,
    clientError: "APIError"
  },
  PoolInUse: {
    httpStatus: 409,
    summary: "The Pool cannot be deleted while workloads run on it or name it in `placement.pool`.",
    fix: "Finish, cancel or re-place the workloads that use the Pool, then delete it again.",
    retryable: false,
    clientError: "AssetInUseError"
  },
  PreconditionFailed: {
    httpStatus: 412,
    summary: "The `If-Match` header does not match the ETag of an estimate for this request.",
    fix:
      "Repeat the dry run (`dryRun=All`) with the exact body you will send and put its `ETag` in `If-Match`, or drop `If-Match` to accept current prices.",
    retryable: false,
    clientError: "APIError"
  },
  PriceConsentRequired: {
    httpStatus: 428,
    summary:
      "The request starts billing at a rate the caller has not agreed to, so it must be bound to a quoted estimate.",
    fix:
      "Send it first with `dryRun=All`, review `status.estimate`, then resend it with that response's `ETag` in `If-Match` to consent to the quoted rate.",
    retryable: false,
    clientError: "APIError"
  },
  PromoCodeExpired: {
    httpStatus: 422,
    summary: "The promo code's validity period has ended.",
    fix: "Remove the promo code or use a current one; expired codes cannot be extended.",
    retryable: false,
    clientError: "ValidationError"
  },
  PromoCodeUsed: {
    httpStatus: 409,
    summary: "The promo code has already been redeemed and cannot be applied again.",
    fix: "Remove the promo code from the request or use a different one; each code is redeemed once.",
    retryable: false,
    clientError: "APIError"
  },
  QuotaExceeded: {
    httpStatus: 403,
    summary:
      "The request would take the project or organization past one of its quotas, such as storage, egress or concurrent resources.",
    fix:
      "Free usage (delete unused Volumes, outputs or finished objects) or ask an organization admin or support for a higher quota; the message names the quota, the usage and the limit.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  RequestEntityTooLarge: {
    httpStatus: 413,
    summary: "The request body is larger than the service accepts for this operation.",
    fix:
      "Shrink the body: inline FunctionCall payloads are at most 64 KiB and AgentRun input at most 256 KiB; upload large data through /blobs/v1 and reference it as `sha256:<hex>`.",
    retryable: false,
    clientError: "ValidationError"
  },
  RequestInProgress: {
    httpStatus: 409,
    summary: "Another request with the same Idempotency-Key is still being processed.",
    fix:
      "Wait `details.retryAfterSeconds` and retry with the same key and payload; the retry returns the original request's result.",
    retryable: true,
    clientError: "IdempotencyConflictError"
  },
  SandboxFailed: {
    httpStatus: 409,
    summary: "The Sandbox is in phase Failed, so it cannot run commands or transfer files.",
    fix:
      "Read the Sandbox's `status.reason` and `status.message` (such as StartupFailed), fix the image or setup they point to, then delete it and create a new Sandbox.",
    retryable: false,
    clientError: "APIError"
  },
  SandboxNotRunning: {
    httpStatus: 409,
    summary: "The Sandbox is not running, so it cannot run commands, open terminals or transfer files.",
    fix:
      "Start it by setting `spec.state` to Running (or the start-requested-at annotation), wait for phase Running, then retry.",
    retryable: false,
    clientError: "APIError"
  },
  SandboxStarting: {
    httpStatus: 409,
    summary: "The Sandbox is still starting and cannot take commands yet.",
    fix:
      "Retry after `details.retryAfterSeconds`, or watch the Sandbox until its phase is Running and its Ready condition is True.",
    retryable: true,
    clientError: "APIError"
  },
  SecretValueInEnv: {
    httpStatus: 422,
    summary: "An env entry carries a secret value literally instead of a reference to a Secret.",
    fix:
      "Store the value in a Secret and read it in the env entry with `valueFrom.secretKeyRef` {name, key}, or mount it through `spec.secrets`.",
    retryable: false,
    clientError: "ValidationError"
  },
  SHA256Mismatch: {
    httpStatus: 422,
    summary: "The content's SHA-256 digest does not match the `sha256` the request declares.",
    fix:
      "Recompute the digest of the exact content (`sha256sum <file>`), then correct the declared `sha256` or upload the right content, and resend.",
    retryable: false,
    clientError: "ValidationError"
  },
  StdinBackpressure: {
    httpStatus: 429,
    summary: "The command is not reading its stdin as fast as it is written, and the stdin buffer is full.",
    fix:
      "Pause writing and retry after `details.retryAfterSeconds`; send stdin in smaller chunks, and check that the command actually reads its stdin.",
    retryable: true,
    clientError: "RateLimitError"
  },
  TooManyRequests: {
    httpStatus: 429,
    summary: "The caller has sent more requests than its rate limit allows in the current window.",
    fix:
      "Wait `details.retryAfterSeconds` (also sent as the Retry-After header) before retrying, and pace requests; use a watch instead of polling.",
    retryable: true,
    clientError: "RateLimitError"
  },
  TopUpLimitReached: {
    httpStatus: 402,
    summary: "The TopUp would exceed the organization's limit on top-ups for the current period.",
    fix: "Top up a smaller amount or wait for the period to pass; contact support to raise the limit.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  TrialLimitExceeded: {
    httpStatus: 402,
    summary: "The request goes beyond what the organization's trial allows.",
    fix: "Add a payment method to leave the trial, or keep the request within the trial limits shown in the message.",
    retryable: false,
    clientError: "BudgetExceededError"
  },
  Unauthorized: {
    httpStatus: 401,
    summary: "The request carries no API key, or its key is wrong for this deployment, expired or revoked.",
    fix:
      "Send `Authorization: Bearer <key>` with a valid, unrevoked API key; `nodus kubeconfig` prints one for the admin.",
    retryable: false,
    clientError: "AuthenticationError"
  },
  Unavailable: {
    httpStatus: 503,
    summary: "The service, or a part of it this request needs, is temporarily unavailable.",
    fix: "Retry after `details.retryAfterSeconds` with backoff, resending any write with its original Idempotency-Key.",
    retryable: true,
    clientError: "APIError"
  },
  Unsupported: {
    httpStatus: 501,
    summary: "This deployment does not support the requested feature or option.",
    fix:
      "Remove the option or use a deployment that supports it; Beta features such as multi-node gangs and the Function cluster option may be missing on some backends.",
    retryable: false,
    clientError: "APIError"
  },
  UnsupportedMediaType: {
    httpStatus: 415,
    summary: "The request's Content-Type is not one this operation accepts.",
    fix:
      "Send `application/json` for create and replace and `application/merge-patch+json` for PATCH (`kubectl patch --type merge`).",
    retryable: false,
    clientError: "ValidationError"
  },
  VolumeBusy: {
    httpStatus: 409,
    summary: "The Volume is in use by another workload or is being saved, so it cannot be attached or deleted now.",
    fix:
      "Stop or finish the Workspace or Job that mounts it and wait for its save to complete, then retry; a ReadWriteOnce Volume has one writer at a time.",
    retryable: true,
    clientError: "AssetInUseError"
  },
  WorkerNotAllowed: {
    httpStatus: 403,
    summary:
      "The worker may not claim or complete this FunctionCall, because it serves another Function or belongs to a superseded epoch.",
    fix:
      "No change is needed in user code: the call has been handed to another worker, so a worker that receives this should drop the call and ask for new work.",
    retryable: false,
    clientError: "APIError"
  },
  WorkspaceStarting: {
    httpStatus: 409,
    summary: "The Workspace is still starting, so its SSH, IDE and notebook endpoints are not ready.",
    fix:
      "Retry after `details.retryAfterSeconds` or watch until phase Running; `status.startEstimate` gives the expected wait.",
    retryable: true,
    clientError: "APIError"
  },
  WorkspaceToolUnavailable: {
    httpStatus: 422,
    summary:
      "The Workspace does not offer the requested tool, because it is not in `spec.tools` or the Workspace's image cannot run it.",
    fix:
      "Add the tool to `spec.tools` (VSCode, Jupyter, SSH) and use an image that provides it, such as a catalog image, then stop and start the Workspace.",
    retryable: false,
    clientError: "ValidationError"
  }
} as const satisfies Record<string, ErrorCodeInfo>

/** A registered error code (the `reason` of a Status body). */
export type ErrorCode = keyof typeof errorCodes

/** Every registered code, in the spec's order (alphabetical, ignoring case). */
export const errorCodeList: ReadonlyArray<ErrorCode> = Object.freeze(Object.keys(errorCodes) as Array<ErrorCode>)

/** True when `value` is a registered code, spelled exactly (case matters). */
export const isErrorCode = (value: string): value is ErrorCode => Object.hasOwn(errorCodes, value)

/** The registry entry of a code. */
export const errorCodeInfo = (code: ErrorCode): ErrorCodeInfo => errorCodes[code]

const reasonPhrases: ReadonlyMap<number, string> = new Map([
  [100, "Continue"],
  [101, "Switching Protocols"],
  [102, "Processing"],
  [103, "Early Hints"],
  [200, "OK"],
  [201, "Created"],
  [202, "Accepted"],
  [203, "Non-Authoritative Information"],
  [204, "No Content"],
  [205, "Reset Content"],
  [206, "Partial Content"],
  [207, "Multi-Status"],
  [208, "Already Reported"],
  [226, "IM Used"],
  [300, "Multiple Choices"],
  [301, "Moved Permanently"],
  [302, "Found"],
  [303, "See Other"],
  [304, "Not Modified"],
  [305, "Use Proxy"],
  [307, "Temporary Redirect"],
  [308, "Permanent Redirect"],
  [400, "Bad Request"],
  [401, "Unauthorized"],
  [402, "Payment Required"],
  [403, "Forbidden"],
  [404, "Not Found"],
  [405, "Method Not Allowed"],
  [406, "Not Acceptable"],
  [407, "Proxy Authentication Required"],
  [408, "Request Timeout"],
  [409, "Conflict"],
  [410, "Gone"],
  [411, "Length Required"],
  [412, "Precondition Failed"],
  [413, "Payload Too Large"],
  [414, "URI Too Long"],
  [415, "Unsupported Media Type"],
  [416, "Range Not Satisfiable"],
  [417, "Expectation Failed"],
  [418, "I'm a Teapot"],
  [421, "Misdirected Request"],
  [422, "Unprocessable Entity"],
  [423, "Locked"],
  [424, "Failed Dependency"],
  [425, "Too Early"],
  [426, "Upgrade Required"],
  [428, "Precondition Required"],
  [429, "Too Many Requests"],
  [431, "Request Header Fields Too Large"],
  [451, "Unavailable For Legal Reasons"],
  [500, "Internal Server Error"],
  [501, "Not Implemented"],
  [502, "Bad Gateway"],
  [503, "Service Unavailable"],
  [504, "Gateway Timeout"],
  [505, "HTTP Version Not Supported"],
  [506, "Variant Also Negotiates"],
  [507, "Insufficient Storage"],
  [508, "Loop Detected"],
  [510, "Not Extended"],
  [511, "Network Authentication Required"]
])

/**
 * The conventional reason phrase of a status (e.g. 422 → "Unprocessable
 * Entity") for docs pages; an unlisted status gets its class's name
 * ("Client Error", "Server Error", ...), anything else "Unknown Status".
 */
export const httpReasonPhrase = (status: number): string => {
  const known = reasonPhrases.get(status)
  if (known !== undefined) return known
  if (!Number.isInteger(status)) return "Unknown Status"
  if (status >= 100 && status < 200) return "Informational"
  if (status >= 200 && status < 300) return "Success"
  if (status >= 300 && status < 400) return "Redirection"
  if (status >= 400 && status < 500) return "Client Error"
  if (status >= 500 && status < 600) return "Server Error"
  return "Unknown Status"
}
