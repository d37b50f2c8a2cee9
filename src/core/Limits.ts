/**
 * Every bound of the spec's Limits table and every range the spec writes beside a field, as named constants (units
 * last: `…Ms`, `…Bytes`). Schemas read these, so admission, OpenAPI and generated test data share one source; a test
 * asserts how they relate (test/core/Limits.test.ts).
 */

export const secondMs = 1_000
export const minuteMs = 60 * secondMs
export const hourMs = 60 * minuteMs
export const dayMs = 24 * hourMs
/** The latest instant a timestamp can show (ECMAScript's Date range, 8.64e15 ms): a deadline beyond it never comes. */
export const latestTimeMs = 8.64e15

export const KiB = 1024
export const MiB = 1024 * KiB
export const GiB = 1024 * MiB
export const TiB = 1024 * GiB

// Job (spec: Job; Limits)
export const jobCompletionsMin = 1
export const jobCompletionsMax = 10_000
export const jobParallelismMax = 256
export const jobBackoffLimitMax = 100
export const jobInputsMax = 8
export const jobOutputsMax = 32
export const initCommandTimeoutMsMax = 30 * minuteMs
/** Log lines of a customer exit that a Job's status.message shows (spec: Job status.message). */
export const failureLogLines = 3
export const scaledownWindowMsMax = 20 * minuteMs

// Recovery (spec: Recovery; Limits)
export const recoveryAttemptsMin = 1
export const recoveryAttemptsMax = 32
export const checkpointIntervalMsMin = minuteMs
export const checkpointIntervalMsMax = 6 * hourMs
export const checkpointMaxSizeBytesDefault = TiB
export const checkpointMaxSizeBytesMax = 2 * TiB
export const checkpointPathsMax = 64
export const checkpointPathDefault = "/platform/state"
export const checkpointRetainAfterFinishDefault = "168h"
export const minProgressDurationDefault = "2m"

// Placement (spec: Placement; Limits)
export const queueTimeoutDefault = "24h"

// Job defaults the spec leaves open (nodus; docs/jobs.md)
/** Customer failures retried when backoffLimit is unset (Kubernetes' default). */
export const jobBackoffLimitDefault = 6
/** Infrastructure replacements per index when recovery.maxAttempts is unset. */
export const recoveryMaxAttemptsDefault = 5
/** A customer suspend checkpoint is tried once and retried twice (spec: States and transitions, Job). */
export const suspendCheckpointTries = 3
export const gpuTypesMin = 1
export const gpuTypesMax = 8
export const gpuCountsPerNode: ReadonlyArray<number> = [1, 2, 4, 8]

// Distributed gangs (spec: Distributed; Limits)
export const gangNodesMin = 2
export const gangNodesMax = 16
/**
 * The most of each resource floor a host could ever have where hosts join over time (live Nodes; docs/jobs.md,
 * "Admission"): well above the largest machines sold today (896 vCPUs, 32 TiB of memory), so only a request no
 * machine could hold is refused before one joins.
 */
export const hostFloorsMax = { cpu: 4_096, memoryGiB: 64 * 1_024, diskGiB: 1_024 * 1_024 } as const
/** Distributed is Beta: the beta caps a gang below the spec's general bound. */
export const gangNodesBetaMax = 8
export const gangTotalGpusMin = 2
export const gangTotalGpusMax = 64
export const gangStartupTimeoutMsMin = 5 * minuteMs
export const gangStartupTimeoutMsMax = 60 * minuteMs
export const gangStartupTimeoutDefault = "15m"
export const maxAssemblyRetriesMax = 5
export const maxAssemblyRetriesDefault = 2

// Network (spec: Network; Limits)
export const egressAllowMax = 128

// What every live box gets when its resources say nothing (nodus, docs/isolation.md, "Bounds"). The spec writes one
// default shape, the Environment's grading Sandbox (cpu 1, memory 1Gi): a box takes that much memory per vCPU of its
// resources.cpu (1 when unset), and its processes and its writable disk are bounded too.
/** Memory per vCPU when resources.memory is unset (the spec's grading Sandbox: cpu 1, memory 1Gi). */
export const boxMemoryBytesPerCpu = GiB
/** Memory per GPU when resources.memory is unset: GPU work needs host memory to stage what it loads onto the GPU. */
export const boxMemoryBytesPerGpu = 16 * GiB
/** Processes (and threads) of one box, per vCPU of its resources.cpu (1 when unset): a fork bomb stops here. */
export const boxPidsPerCpu = 1_024
/** A box's writable space (/platform/work, state, outputs, a Sandbox's /workspace) when resources.disk is unset. */
export const boxDiskBytesDefault = 10 * GiB
/** The smallest quota a box's writable space gets (an ext4 image smaller than this holds little beyond its journal). */
export const boxDiskBytesMin = 16 * MiB

// Sandbox (spec: Sandbox; Limits)
export const sandboxEnvMax = 256
export const sandboxSecretsMax = 32
export const sandboxIdleTimeoutMsMin = minuteMs
export const sandboxIdleTimeoutMsMax = 24 * hourMs
export const sandboxIdleTimeoutDefault = "5m"
export const sandboxMaxLifetimeMsMin = minuteMs
export const sandboxMaxLifetimeMsMax = 720 * hourMs
export const sandboxMaxLifetimeDefault = "24h"
/** A box not ready this long after its start is said to be stuck (sandbox.stuck; nodus, docs/kinds/Sandbox.md). */
export const sandboxStuckAfterMs = 5 * minuteMs
/**
 * A Sandbox command (nodus, docs/sandboxes.md): its argv, its env, and how long a foreground one may run by default.
 */
export const sandboxCommandArgsMax = 4096
export const sandboxCommandEnvMax = 256
export const sandboxCommandTimeoutDefault = "10m"
export const sandboxCommandTimeoutMsMax = 24 * hourMs
/**
 * A Sandbox's command output as its host's agent keeps it (docs/sandboxes.md, "Output"): per command, per box (all its
 * commands), and per host (every box its agent runs); past each the oldest bytes go. A foreground command's answer
 * carries the last `sandboxReplyOutputBytesMax` of its stdout and of its stderr; a box remembers its running commands
 * and the last `sandboxCommandsKeptMax` that exited.
 */
export const sandboxCommandOutputBytesMax = 16 * 1024 * 1024
export const sandboxBoxOutputBytesMax = 64 * 1024 * 1024
export const sandboxHostOutputBytesMax = 128 * 1024 * 1024
export const sandboxReplyOutputBytesMax = 4 * 1024 * 1024
export const sandboxCommandsKeptMax = 64
/** The largest file one Sandbox file request carries (FileTooLarge above; docs/sandboxes.md, "Files"). */
export const sandboxFileBytesMax = 16 * 1024 * 1024
/** What /workspace continuity saves and restores (spec: Sandbox continuity). */
export const sandboxWorkspacePath = "/workspace"

/**
 * How long a host keeps the /workspace of a box that ended unasked when no box of its Sandbox takes it
 * (KeptWorkspaces).
 */
export const keptWorkspaceMaxAgeMs = 24 * hourMs

/**
 * Blobs (nodus, docs/blobs.md): the largest blob one upload stores (FileTooLarge above), and the chunk its bytes are
 * kept in (a row of the store's database each).
 */
export const blobBytesMax = GiB
export const blobChunkBytes = MiB
/** An upload left unfinished (a crashed server, a client gone) is swept after this long. */
export const blobUploadAbandonedMs = hourMs

// Workspace (spec: Workspace; Limits)
export const workspaceEnvMax = 256
export const workspaceConnectionsMax = 4
export const workspaceImagePullSecretsMax = 4
export const workspaceSshKeysMax = 100
export const workspaceIdleTimeoutDefault = "1h"
export const workspaceIdleTimeoutMsMin = 10 * minuteMs
export const workspaceIdleTimeoutMsMax = 24 * hourMs
export const workspaceReadyByLeadMs = 15 * minuteMs

// Function (spec: Function; Limits)
export const functionTimeoutMsMin = secondMs
export const functionTimeoutMsMax = 24 * hourMs
export const functionTimeoutDefault = "300s"
/** How long one long poll of a FunctionCall's result is held (nodus, docs/functions.md): clients ask again. */
export const functionCallResultWaitDefault = "30s"
export const functionCallResultWaitMsMax = 60 * secondMs
export const functionWorkersMax = 1_000
export const functionMaxWorkersDefault = 10
export const functionTargetConcurrencyMax = 1_000
export const functionTargetConcurrencyDefault = 1
export const functionScaledownWindowDefault = "60s"
export const functionRetriesMax = 10
export const functionBackoffCoefficientMin = 1
export const functionBackoffCoefficientMax = 10
export const functionBackoffCoefficientDefault = "2.0"
export const functionInitialDelayDefault = "1s"
export const functionMaxDelayDefault = "60s"
export const functionClassMethodsMax = 128
export const functionPythonMinors: ReadonlyArray<string> = ["3.10", "3.11", "3.12", "3.13"]

// FunctionCall (spec: FunctionCall; Limits)
export const payloadInlineBytesMax = 64 * KiB
export const functionCallBatchMax = 1_000
/** nodus: how long a FunctionCall is kept after it ends (spec: "calls kept 7 days after ending"). */
export const functionCallRetentionMs = 7 * 24 * hourMs
/**
 * nodus: workers of one template that end before they are ready, in a row, before the Function is Failed
 * (WorkerStartupFailed) until its code, image or resources change (docs/kinds/Function.md).
 */
export const functionWorkerStartFailuresMax = 3

// Sweep (spec: Sweep; Limits)
export const sweepMaxParallelMax = 256
export const sweepMaxParallelDefault = 4
export const sweepRepetitionsMax = 64
export const sweepRepetitionsDefault = 1
export const sweepGpuValuesMax = 16
export const sweepParamNamesMax = 16
export const sweepParamValuesMax = 64

// TrainingJob (spec: TrainingJob; Limits)
export const trainingMinComparisonTasks = 16
export const trainingGradingMaxParallelDefault = 4
export const trainingGradingMaxParallelMax = 32
export const trainingValidationFractionDefault = "0.05"

// Environment (spec: Environment; Limits)
export const environmentSampleTaskBytesMax = 4 * KiB
export const environmentGradingTimeoutDefault = "60s"
export const environmentGradingTimeoutMsMax = 10 * minuteMs
export const environmentSandboxCpuDefault = "1"
export const environmentSandboxMemoryDefault = "1Gi"

// AgentRun (spec: AgentRun; Limits)
export const agentRunInputBytesMax = 256 * KiB
export const agentRunParallelismMax = 32
export const agentRunAnswerPreviewBytes = 4 * KiB

// AgentGroup (spec: AgentGroup; Limits)
export const agentGroupMaxActiveMax = 1_000
export const agentGroupMaxActiveDefault = 10
export const agentGroupMaxPendingMax = 10_000
export const agentGroupMaxPendingDefault = 10_000
export const agentRunListMax = 100
export const evaluationTasksMax = 100
export const evaluationTimeoutMsMin = minuteMs
export const evaluationTimeoutMsMax = 24 * hourMs
export const evaluationTimeoutDefault = "30m"

// Pool (spec: Pool; Limits)
export const poolActPoliciesMax = 16
export const poolPredictHorizonMsMin = 24 * hourMs
export const poolPredictHorizonMsMax = 720 * hourMs
export const poolPredictHorizonDefault = "168h"
export const poolWaitTimeoutMsMin = minuteMs
export const poolWaitTimeoutMsMax = 24 * hourMs
export const poolWaitTimeoutDefault = "30m"

// Webhook (spec: WebhookEndpoint, Events; Limits)
export const webhookBodyBytesMax = 64 * KiB
export const webhookPreviousSecretTtlDefault = "24h"
export const webhookPreviousSecretTtlMsMax = 7 * dayMs
export const webhookResponseWaitMs = 15_000
export const webhookRetryFirstDelayMs = 30_000
export const webhookRetryDelayMsMax = 8 * hourMs
export const webhookRetryWindowMs = 3 * dayMs
export const webhookLogRetentionMs = 7 * dayMs
export const webhookTimestampToleranceMs = 5 * minuteMs
/** Failed deliveries in a row that make an endpoint unhealthy (spec: Events, retry rule 6). */
export const webhookFailuresUnhealthy = 3
/** A signing secret is `whsec_` + base64 of 24 to 64 random bytes; nodus makes 32. */
export const webhookSecretBytes = 32
/** Entries of one page of a delivery log: the default, and the most a `limit` may ask. */
export const webhookDeliveriesPageDefault = 100
export const webhookDeliveriesPageMax = 1_000

// Names and reserved prefixes (spec: EnvVar, JobInput, JobOutput)
export const reservedEnvPrefix = "PLATFORM_"
export const reservedOutputPrefix = "platform."

// AgentGroup evaluation and Agent (spec: AgentGroup; Limits: "tasks x repetitions at most 100". The Agent bounds are
// nodus's own — the spec does not show the Agent's fields; docs/kinds/Agent.md)
export const evaluationTaskRepetitionsMax = 100
export const agentInstructionsBytesMax = 256 * KiB
export const agentToolsMax = 128
export const agentAllowedModelsMax = 64

// Own and other capacity: Pool policies, Node, EnrollmentToken, MarketplaceEntry, CloudAccount (spec: Pool,
// MarketplaceEntry, Other kinds). The spec gives no bounds for these fields: every constant in this block is nodus's
// own (docs/kinds/Pool.md, Node.md, EnrollmentToken.md, MarketplaceEntry.md, CloudAccount.md).
export const poolPolicyDurationMsMin = minuteMs
export const percentMax = 100
export const nodeHostnameMax = 253
export const enrollmentTokenExpiresAfterMsMin = minuteMs
export const enrollmentTokenExpiresAfterMsMax = 720 * hourMs
export const enrollmentTokenExpiresAfterDefault = "24h"
export const enrollmentTokenMaxUsesMax = 1_000
export const enrollmentTokenMaxUsesDefault = 1
export const marketplaceTextMax = 200
export const marketplaceNotesMax = 4 * KiB
export const cloudAccountRegionsMax = 64

// Accounts, billing, files and history: WebhookEndpoint, Budget, CreditGrant, TopUp, ServiceAccount, Secret,
// Connection, Volume, Image, InferenceEndpoint, Pipeline (spec: WebhookEndpoint, Events, Other kinds; Limits). The spec
// gives none of these bounds: each is nodus's own (docs/kinds/<Kind>.md).
export const webhookUrlLengthMax = 2_048
export const webhookEventTypesMax = 64
export const webhookProjectsMax = 256
export const webhookDescriptionLengthMax = 1_024
export const budgetThresholdsMax = 10
export const budgetThresholdPercentMin = 1
export const budgetThresholdPercentMax = 100
export const budgetProjectsMax = 256
export const creditGrantReasonLengthMax = 1_024
/** The most one TopUp may add (nodus; TopUpLimitReached above it): 10,000 USD, in micro-USD. */
export const topUpAmountMicroMax = 10_000_000_000n
export const promoCodeLengthMax = 64
/** Kubernetes' bounds on a Secret: keys at most 253 characters, all data at most 1 MiB. */
export const secretKeyLengthMax = 253
export const secretDataBytesMax = MiB
export const connectionEnvMax = 256
export const connectionCredentialsMax = 16
export const volumeSizeBytesMax = 64 * TiB
export const volumeSizeMaxText = "64Ti"
/**
 * Revisions of a Volume kept (nodus; the spec says only that a Volume has revisions): the newest this many, each an
 * archive in the blob store. Older ones are dropped when a new one is committed; a JobInput or VolumeMount naming
 * one of those fails at start, naming what is kept (docs/kinds/Volume.md).
 */
export const volumeRevisionsKept = 16
/**
 * What a revision may expand to beyond its Volume's spec.size: tar's own headers and padding (512 bytes or more per
 * member). Past size + this, a revision is refused at commit and a host stops unpacking it (docs/kinds/Volume.md).
 */
export const volumeArchiveHeadroomBytes = 16 * MiB
export const imageBuildArgsMax = 64
export const imagePullSecretsMax = 4
export const inferenceReplicasMax = 64
export const pipelineStagesMax = 64
