/**
 * The node agent's protocol (docs/live.md, "The node agent"): what a host and the control plane say to each other.
 * The agent always calls; the server never connects to a host (hosts behind NAT work). It is level-triggered, like a
 * kubelet: the server keeps, per Node, the runs that should be there; the agent keeps, per run, what happened; one
 * call, `sync`, sends everything the agent knows and answers everything the server wants. A sync renews the Node's
 * lease; a sync under an older lease epoch is refused, so nothing a host says after its lease lapsed is taken in.
 *
 * The same messages travel in-process (the local backend's agent) and over HTTPS (`nodus agent`, AgentHttp.ts).
 */
import { Schema } from "effect"
import type { BoxReply, BoxRequest, WorkerProgram } from "../../core/capacity/Capacity.ts"

/** Lease timing (issue: renew every 10 s, lapse after 40 s). */
export const leaseRenewMs = 10_000
export const leaseExpiryMs = 40_000

/** What a host has, as the agent measured it. */
export interface HostCapacity {
  readonly cpus: number
  readonly memoryBytes: number
  readonly diskBytes: number
  /** One entry per GPU (nvidia-smi), empty without. */
  readonly gpus: ReadonlyArray<{ readonly model: string; readonly memoryMiB: number }>
}

/** What the host can and cannot do for isolation (a problem is a sentence with its fix). */
export interface HostIsolation {
  readonly bubblewrap: boolean
  readonly memoryLimits: boolean
  readonly problems: ReadonlyArray<string>
}

export interface Hello {
  readonly node: string
  readonly hostname: string
  readonly agentVersion: string
  readonly capacity: HostCapacity
  readonly isolation: HostIsolation
  /** The runs the agent still holds (after a lost lease or a server restart): the server keeps those it placed. */
  readonly runs?: ReadonlyArray<string> | undefined
}

/** The server's answer to a hello: the lease this connection holds until it lapses. */
export interface Lease {
  readonly epoch: number
  readonly renewMs: number
  readonly expiryMs: number
}

/** A program the server wants on the host, with everything resolved (secret values included: never logged). */
export interface RunSpec {
  /** `<owner>/<attempt>`: unique on the server. */
  readonly id: string
  readonly argv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly secretFiles: ReadonlyArray<{ readonly name: string; readonly contentBase64: string }>
  readonly workingDir: string | undefined
  /** AllowList: only the listed names, through the run's proxy on the host (EgressProxy.ts). */
  readonly egress: "Deny" | "Open" | { readonly allow: ReadonlyArray<string> }
  readonly memoryBytes: number | undefined
  /**
   * The box's process limit and its writable space's quota; absent: the agent's defaults (docs/isolation.md, "Bounds").
   */
  readonly pidsMax?: number | undefined
  readonly diskBytes?: number | undefined
  readonly init: { readonly argv: ReadonlyArray<string>; readonly timeoutMs: number } | undefined
  readonly checkpointIntervalMs: number | undefined
  /** What a checkpoint saves (paths in the box, under /platform) and the most it may be, checked before upload. */
  readonly checkpoint: { readonly paths: ReadonlyArray<string>; readonly maxBytes: number }
  /** The owner's checkpoint to restore first (it is fetched from the server, so any host can restore it). */
  readonly restore: { readonly owner: string; readonly seq: number } | undefined
  /** The owner's checkpoints are numbered on from here. */
  readonly owner: string
  /** Paths collected when the program succeeds (spec: JobOutput); /platform/outputs is collected as `outputs` too. */
  readonly outputs: ReadonlyArray<{ readonly name: string; readonly path: string }>
  /**
   * Materialized read-only at /platform/inputs/<name> before the program starts (spec: JobInput), each checked against
   * its SHA-256 at the end of the stream: a URL the host downloads, or bytes the server holds (another Job's output).
   */
  readonly inputs: ReadonlyArray<RunInput>
  /** A Sandbox's box (BoxSupervisor.ts): `argv` is its optional main process; it serves box calls until stopped. */
  readonly box?: boolean | undefined
  /** A Snapshotted Sandbox's box: its /workspace is kept on the host when the box ends unasked (KeptWorkspaces.ts). */
  readonly keepWorkspace?: boolean | undefined
  /**
   * A Function's warm worker (PythonWorker.ts) instead of `argv`: Running once it imported its code, answering `Call`
   * box requests until stopped (docs/functions.md, "The worker").
   */
  readonly worker?: WorkerProgram | undefined
  /**
   * How many of the host's GPUs the run is given (absent: none). The server counts them per Node; the agent picks
   * which, and the box sees those devices alone (docs/live.md, "GPUs").
   */
  readonly gpus?: number | undefined
}

export type RunInput =
  | { readonly name: string; readonly url: string; readonly sha256: string }
  /**
   * Bytes the server holds; a Volume's revision is its archive (a tar.zst), unpacked as the input's directory, or at
   * `mountPath` in the box (read-only) for a Volume mount.
   */
  | {
    readonly name: string
    readonly fromServer: true
    readonly sha256: string
    readonly volume?: VolumeInput | undefined
    readonly mountPath?: string | undefined
  }

/** Which revision of which Volume an input is (spec: Job status.inputs volumeName, volumeRevision, volumeUID). */
export interface VolumeInput {
  readonly name: string
  readonly revision: number
  readonly uid: string
  /**
   * The Volume's spec.size in bytes: what its revision may expand to on the host (absent: the box's quota bounds it).
   */
  readonly sizeBytes?: number | undefined
}

/** What the server wants of a host now. */
export interface Desired {
  /** Grows with every change: the agent's long poll waits for a newer one. */
  readonly version: number
  readonly runs: ReadonlyArray<RunSpec>
  /** Runs a previous server process placed, kept as they are (the agent has their specs; none is started from here). */
  readonly adopted: ReadonlyArray<string>
  /** Suspend checkpoints asked: run id → the episode. */
  readonly checkpoints: Readonly<Record<string, number>>
  /** Requests to boxes, each answered once in a later sync's `replies` (they stay here until answered). */
  readonly calls?: ReadonlyArray<BoxCall> | undefined
}

/** A request to the box of one of the Node's runs (a Sandbox's command or file; core/capacity/Capacity.ts). */
export interface BoxCall {
  readonly id: number
  readonly run: string
  readonly request: BoxRequest
}

export interface BoxCallReply {
  readonly id: number
  readonly reply: BoxReply
}

/** How a program ended, as the host saw it. */
export interface Exit {
  readonly exitCode: number | undefined
  readonly signal: string | undefined
  readonly oomKilled: boolean
  /** It was stopped because the server no longer wanted it. */
  readonly stopped: boolean
  /** Why it never started (a missing tool, the initCommand's timeout), when it did not. */
  readonly problem: string | undefined
  /** The host failed to set the run up (not the program's doing): the run is lost as BootFailed and recovered. */
  readonly setupFailed: boolean
  /** The last lines of its log, for status.message (scrubbed by the server). */
  readonly lastLines: ReadonlyArray<string>
  /** The outputs it uploaded (putOutput) when it succeeded, by name with the path they came from. */
  readonly outputs: ReadonlyArray<{ readonly name: string; readonly path: string }>
}

/** Everything the agent knows of one run. */
export interface RunReport {
  readonly id: string
  readonly phase: "Starting" | "Running" | "Exited"
  readonly exit: Exit | undefined
  readonly checkpoint: { readonly seq: number; readonly sizeBytes: number } | undefined
  readonly checkpointFailures: number
  readonly suspend: {
    readonly episode: number
    readonly state: "Pending" | "Saved" | "Failed"
    readonly failures: number
  } | undefined
  /** Log bytes not yet acknowledged, from `logOffset` on (UTF-8 text). */
  readonly logOffset: number
  readonly log: string
  /** A box: whether a command runs in it now; a worker: whether a call does. */
  readonly busy?: boolean | undefined
}

export interface SyncRequest {
  readonly node: string
  readonly epoch: number
  /** The newest desired version the agent has applied. */
  readonly version: number
  readonly runs: ReadonlyArray<RunReport>
  /** How long the server may hold the answer while nothing changes (0: answer at once). */
  readonly waitMs: number
  /** Answers to box calls. */
  readonly replies?: ReadonlyArray<BoxCallReply> | undefined
}

export type SyncResponse =
  | { readonly _tag: "Desired"; readonly desired: Desired; readonly logAcks: Readonly<Record<string, number>> }
  /** The lease lapsed or another connection took it: say hello again; nothing sent was taken in. */
  | { readonly _tag: "Stale" }

/**
 * Enrollment (`nodus agent --token`): the host presents an EnrollmentToken and the hash of a key it made; the server
 * creates the Node in the token's Pool and from then on knows the agent by that key (it never holds the key itself).
 */
export interface EnrollRequest {
  readonly token: string
  /** The Node's name (default: the host name, made a DNS label). */
  readonly node: string
  readonly hostname: string
  /** sha256 hex of the key the agent made: its credential for hello and sync. */
  readonly credentialHash: string
}

export interface EnrollResponse {
  readonly node: string
  readonly namespace: string
  readonly pool: string
}

/** The paths of the protocol over HTTPS, relative to the server's URL. */
export const agentPaths = {
  enroll: "/agent/v1/enroll",
  hello: "/agent/v1/hello",
  sync: "/agent/v1/sync",
  outputs: "/agent/v1/outputs",
  inputs: "/agent/v1/inputs",
  checkpoints: "/agent/v1/checkpoints",
  restores: "/agent/v1/restores"
} as const

/** Where an output upload goes: a run of the Node, under its current lease. */
export interface OutputTarget {
  readonly node: string
  readonly epoch: number
  readonly run: string
  readonly name: string
}

/** The control plane as an agent sees it: in-process or over HTTPS, the same calls. */
export interface AgentLink {
  readonly hello: (hello: Hello) => Promise<Lease>
  readonly sync: (request: SyncRequest) => Promise<SyncResponse>
  /** Uploads one output of a run from a file of the host; the server keeps it with its SHA-256 and size. */
  readonly putOutput: (target: OutputTarget, file: string) => Promise<void>
  /** The bytes of an input the server holds (`fromServer`), for a run of the Node under its current lease. */
  readonly getInput: (target: OutputTarget) => Promise<AsyncIterable<Uint8Array>>
  /** Uploads a checkpoint of a run (`name` unused); the server numbers it among its owner's and answers the number. */
  readonly putCheckpoint: (target: OutputTarget, file: string) => Promise<{ readonly seq: number }>
  /** The bytes of the run's restore checkpoint (RunSpec.restore). */
  readonly getCheckpoint: (target: OutputTarget) => Promise<AsyncIterable<Uint8Array>>
}

export const runIdOf = (owner: string, attempt: string) => `${owner}/${attempt}`

/** The largest output one upload may carry (FileTooLarge above it; docs/live.md, "Outputs"). */
export const outputBytesMax = 1024 ** 3

// ---------------------------------------------------------------------------------------------------------------------
// What the server reads from an agent, checked: an agent is a host the customer runs, so its messages are input.

const Str = Schema.String
const Num = Schema.Finite
const Opt = <S extends Schema.Top>(schema: S) => Schema.optionalKey(Schema.UndefinedOr(schema))

export const EnrollRequestSchema = Schema.Struct({ token: Str, node: Str, hostname: Str, credentialHash: Str })

export const HelloSchema = Schema.Struct({
  node: Str,
  hostname: Str,
  agentVersion: Str,
  capacity: Schema.Struct({
    cpus: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 4096 })),
    memoryBytes: Num,
    diskBytes: Num,
    gpus: Schema.Array(Schema.Struct({ model: Str, memoryMiB: Num })).check(Schema.isMaxLength(64))
  }),
  isolation: Schema.Struct({ bubblewrap: Schema.Boolean, memoryLimits: Schema.Boolean, problems: Schema.Array(Str) }),
  runs: Opt(Schema.Array(Str))
})

const ExitSchema = Schema.Struct({
  exitCode: Opt(Num),
  signal: Opt(Str),
  oomKilled: Schema.Boolean,
  stopped: Schema.Boolean,
  problem: Opt(Str),
  setupFailed: Schema.Boolean,
  lastLines: Schema.Array(Str),
  outputs: Schema.Array(Schema.Struct({ name: Str, path: Str }))
})

const RunReportSchema = Schema.Struct({
  id: Str,
  phase: Schema.Literals(["Starting", "Running", "Exited"]),
  exit: Opt(ExitSchema),
  checkpoint: Opt(Schema.Struct({ seq: Num, sizeBytes: Num })),
  checkpointFailures: Num,
  suspend: Opt(Schema.Struct({ episode: Num, state: Schema.Literals(["Pending", "Saved", "Failed"]), failures: Num })),
  logOffset: Num,
  log: Str,
  busy: Opt(Schema.Boolean)
})

const BoxCommandSchema = Schema.Struct({
  command: Str,
  argv: Schema.Array(Str),
  phase: Schema.Literals(["Running", "Exited"]),
  exitCode: Opt(Num),
  signal: Opt(Str),
  timedOut: Schema.Boolean,
  startTime: Num,
  durationMs: Opt(Num),
  stdout: Opt(Str),
  stderr: Opt(Str),
  truncated: Opt(Schema.Boolean),
  droppedBytes: Opt(Num)
})

const BoxReplySchema = Schema.Union([
  Schema.TaggedStruct("Command", { state: BoxCommandSchema }),
  Schema.TaggedStruct("Commands", { commands: Schema.Array(BoxCommandSchema) }),
  Schema.TaggedStruct("Output", { offset: Num, data: Str, exited: Schema.Boolean }),
  Schema.TaggedStruct("File", { data: Str, size: Num }),
  Schema.TaggedStruct("Directory", {
    entries: Schema.Array(
      Schema.Struct({
        name: Str,
        size: Num,
        mode: Str,
        modTime: Str,
        type: Schema.Literals(["file", "directory", "symlink", "other"])
      })
    )
  }),
  Schema.TaggedStruct("Done", {}),
  Schema.TaggedStruct("Result", {
    outcome: Schema.Union([
      Schema.Struct({ ok: Schema.Literal(true), encoding: Schema.Literals(["JSON", "Pickle"]), result: Str }),
      Schema.Struct({ ok: Schema.Literal(false), error: Schema.Struct({ type: Str, message: Str, traceback: Str }) })
    ])
  }),
  Schema.TaggedStruct("Refused", {
    code: Schema.Literals([
      "NotFound",
      "Forbidden",
      "Conflict",
      "Invalid",
      "FileTooLarge",
      "StdinBackpressure",
      "SandboxNotRunning",
      "SandboxStarting",
      "Unavailable"
    ]),
    message: Str
  })
])

export const SyncRequestSchema = Schema.Struct({
  node: Str,
  epoch: Num,
  version: Num,
  runs: Schema.Array(RunReportSchema),
  waitMs: Num.check(Schema.isBetween({ minimum: 0, maximum: leaseRenewMs })),
  replies: Opt(Schema.Array(Schema.Struct({ id: Num, reply: BoxReplySchema })))
})
