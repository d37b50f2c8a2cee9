/**
 * The registry of every kind the resource API serves: its names, scope, group version, the operations the spec's
 * "Availability by kind" table grants it, and how `kubectl get` prints it. Discovery, routing, scope checks, OpenAPI
 * and Table output all read this one table, so a kind is declared once.
 *
 * Where the spec leaves a fact open ("paths not shown", a blank scope), the choice is written beside the row and in
 * docs/kinds.md.
 */

/** Spec: Versioning. Stable kinds live in v1; TrainingJob and TrainingRuntime in v1beta1. */
export type Version = "v1" | "v1beta1"

export type Scope = "Namespaced" | "Cluster"

/**
 * One operation of the spec's "Generic operations" table. `listAll` is the all-projects list of a namespaced kind;
 * `writeStatus` (PUT and merge PATCH on `/status`) is the controllers' write path, granted to every kind with a status.
 */
export type Operation =
  | "list"
  | "listAll"
  | "watch"
  | "create"
  | "get"
  | "replace"
  | "patch"
  | "delete"
  | "getStatus"
  | "writeStatus"

/** A column of the server-side Table (`kubectl get`). `path` is a dotted path into the object. */
export interface Column {
  readonly name: string
  readonly type: "string" | "integer" | "date"
  readonly path: string
  /** 0 is always shown; 1 only with `-o wide`. */
  readonly priority: 0 | 1
  /** How a cell is rendered from the raw value. */
  readonly format?: "usd"
  /** The cell is the `status` of the condition of this type in the list at `path` (True, False or Unknown). */
  readonly condition?: string
  readonly description: string
}

export interface KindInfo {
  readonly kind: string
  readonly plural: string
  readonly singular: string
  readonly version: Version
  readonly scope: Scope
  readonly shortNames: ReadonlyArray<string>
  readonly operations: ReadonlySet<Operation>
  /** Spec: Object envelope — `spec` is required on write for kinds that have one. */
  readonly hasSpec: boolean
  /** Where `status.cost.totalUSD` (or the kind's own cost field) lives, when the kind spends money. */
  readonly costPath?: string
  /** Extra columns beyond NAME, PHASE, AGE (and COST). */
  readonly columns: ReadonlyArray<Column>
  /** Shown in PHASE's place, for a kind whose status has no phase (an empty PHASE column tells nothing). */
  readonly state?: Column
  /** The scope prefix checked for this kind (`<prefix>:read`, `<prefix>:write`); billing kinds share `billing`. */
  readonly scopePrefix: string
  readonly description: string
}

/** Every kind is in this category, so `kubectl get nodus` lists them all. */
export const category = "nodus"

const readOps: ReadonlyArray<Operation> = ["list", "listAll", "watch", "get"]
/** "list (project and all projects), create, read, replace, delete, patch, read status". */
const fullOps: ReadonlyArray<Operation> = [
  ...readOps,
  "create",
  "replace",
  "patch",
  "delete",
  "getStatus",
  "writeStatus"
]

interface KindRow {
  readonly kind: string
  readonly plural: string
  readonly shortNames?: ReadonlyArray<string>
  readonly version?: Version
  readonly scope?: Scope
  readonly operations: ReadonlyArray<Operation>
  readonly hasSpec?: boolean
  readonly costPath?: string
  readonly columns?: ReadonlyArray<Column>
  readonly state?: Column
  readonly scopePrefix?: string
  readonly description: string
}

const wide = (name: string, path: string, description: string, type: Column["type"] = "string"): Column => ({
  name,
  type,
  path,
  priority: 1,
  description
})
const shown = (name: string, path: string, description: string, type: Column["type"] = "string"): Column => ({
  name,
  type,
  path,
  priority: 0,
  description
})

/** The status of one of the object's `status.conditions`. */
const condition = (type: string, description: string): Column => ({
  ...shown(type, "status.conditions", description),
  condition: type
})

const totalCost = "status.cost.totalUSD"

/** Spec: Availability by kind, one row per plural, in the spec's order. */
const rows: ReadonlyArray<KindRow> = [
  {
    kind: "AgentGroup",
    plural: "agentgroups",
    shortNames: ["agg"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Agent", "spec.agent", "The Agent every member run runs")],
    description: "Many AgentRuns of one Agent with a concurrency limit, dependency graph and shared cost cap."
  },
  {
    kind: "AgentRun",
    plural: "agentruns",
    shortNames: ["ar"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Agent", "spec.agent", "The Agent this run executes")],
    description: "A durable conversation of an Agent revision in its own Sandbox."
  },
  {
    kind: "Agent",
    plural: "agents",
    shortNames: ["ag"],
    operations: fullOps,
    description: "An agent definition whose revisions AgentRuns execute."
  },
  {
    kind: "App",
    plural: "apps",
    operations: fullOps,
    description: "A group of Functions deployed together from one code archive."
  },
  {
    kind: "Connection",
    plural: "connections",
    shortNames: ["conn"],
    operations: fullOps,
    description: "Injects env and egress hosts; may be an object-storage or database connection."
  },
  {
    kind: "Environment",
    plural: "environments",
    shortNames: ["env"],
    operations: fullOps,
    columns: [wide("Version", "spec.version", "SemVer version")],
    description: "An RL and evaluation environment: a tasks command and a grader."
  },
  {
    kind: "FunctionCall",
    plural: "functioncalls",
    shortNames: ["fnc"],
    operations: fullOps,
    costPath: "status.costUSD",
    columns: [wide("Function", "spec.function", "The Function invoked")],
    description: "One invocation of a Function."
  },
  {
    kind: "Function",
    plural: "functions",
    shortNames: ["fn"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Image", "spec.image", "Container image")],
    description: "A deployed function served by warm workers."
  },
  {
    kind: "Image",
    plural: "images",
    shortNames: ["img"],
    operations: fullOps,
    description: "A container image reference pinned to a digest."
  },
  {
    kind: "InferenceEndpoint",
    plural: "inferenceendpoints",
    shortNames: ["ie"],
    operations: fullOps,
    costPath: totalCost,
    description: "A served model endpoint."
  },
  {
    kind: "Job",
    plural: "jobs",
    shortNames: ["nj"],
    operations: fullOps,
    costPath: totalCost,
    columns: [
      shown("Succeeded", "status.succeeded", "Indexes succeeded", "integer"),
      wide("Indexes", "status.completedIndexes", "Completed indexes, e.g. 0-3,7"),
      wide("Image", "spec.image", "Container image"),
      wide("Offering", "status.placement.offering", "Offering of the current placement")
    ],
    description: "A run-to-completion container with indexed completions, checkpoints and recovery from preemption."
  },
  {
    kind: "Sandbox",
    plural: "sandboxes",
    shortNames: ["sbx"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Image", "spec.image", "Container image"), wide("Activity", "status.activity", "Busy or Idle")],
    description: "An isolated CPU container for agents and untrusted code, driven by commands."
  },
  {
    kind: "Workspace",
    plural: "workspaces",
    shortNames: ["ws"],
    operations: fullOps,
    costPath: totalCost,
    columns: [wide("Image", "spec.image", "Container image")],
    description: "A GPU or CPU development machine with SSH, browser IDE, notebook and a persistent home volume."
  },
  {
    kind: "Sweep",
    plural: "sweeps",
    shortNames: ["swp"],
    operations: fullOps,
    costPath: totalCost,
    description: "A Job or TrainingJob template fanned out over a matrix."
  },
  {
    kind: "Pool",
    plural: "pools",
    operations: fullOps,
    description: "Customer hosts that are measured, routed onto, forecast and managed."
  },
  {
    kind: "Attempt",
    plural: "attempts",
    shortNames: ["att"],
    operations: readOps,
    hasSpec: false,
    costPath: totalCost,
    description: "One run of capacity for a workload, with its placement explanation and receipt."
  },
  {
    kind: "EnrollmentToken",
    plural: "enrollmenttokens",
    shortNames: ["et"],
    operations: [...readOps, "create", "delete"],
    description: "A token that enrolls a customer host into a Pool."
  },
  {
    kind: "Budget",
    plural: "budgets",
    shortNames: ["bdg"],
    scope: "Cluster",
    operations: fullOps,
    scopePrefix: "billing",
    state: condition("Exceeded", "True while spent plus held reaches the amount (its Exceeded condition)"),
    columns: [
      { ...shown("Amount", "spec.amountUSD", "The cap per period"), format: "usd" },
      shown("Period", "spec.period", "Monthly, Weekly, Daily or Total"),
      { ...shown("Spent", "status.spentUSD", "Charged this period by matching work"), format: "usd" },
      { ...shown("Held", "status.heldUSD", "Held now by matching work"), format: "usd" }
    ],
    description: "A USD cap per period matched by project and labels during holds."
  },
  {
    kind: "CloudAccount",
    plural: "cloudaccounts",
    shortNames: ["ca"],
    scope: "Cluster",
    operations: fullOps,
    description: "A customer cloud account capacity can be rented through."
  },
  {
    kind: "MarketplaceEntry",
    plural: "marketplaceentries",
    shortNames: ["me"],
    scope: "Cluster",
    operations: fullOps,
    columns: [wide("Intent", "spec.intent", "Demand or Supply")],
    description: "A private, non-binding capacity request or supply submission."
  },
  {
    kind: "WebhookEndpoint",
    plural: "webhookendpoints",
    shortNames: ["wh"],
    scope: "Cluster",
    operations: fullOps,
    state: condition("Healthy", "False after the last three deliveries in a row failed (its Healthy condition)"),
    columns: [wide("URL", "spec.url", "Receiver URL")],
    description: "A receiver of signed event deliveries."
  },
  {
    kind: "CreditGrant",
    plural: "creditgrants",
    shortNames: ["cg"],
    scope: "Cluster",
    operations: readOps,
    columns: [
      { ...shown("Amount", "spec.amountUSD", "Credits granted"), format: "usd" },
      { ...shown("Remaining", "status.remainingUSD", "Credits of the grant not yet spent"), format: "usd" },
      shown("Source", "spec.source", "Starter, Promo, TopUp or Admin")
    ],
    scopePrefix: "billing",
    description: "Credits added to the account."
  },
  {
    kind: "MarketplaceContract",
    plural: "marketplacecontracts",
    shortNames: ["mc"],
    scope: "Cluster",
    operations: readOps,
    description: "An agreement between a marketplace demand and supply."
  },
  {
    kind: "TrainingJob",
    plural: "trainingjobs",
    shortNames: ["tj"],
    version: "v1beta1",
    operations: fullOps,
    costPath: totalCost,
    description: "A pre-training, fine-tuning, post-training or RL run on a TrainingRuntime (Beta)."
  },
  {
    kind: "TrainingRuntime",
    plural: "trainingruntimes",
    shortNames: ["tr"],
    version: "v1beta1",
    operations: fullOps,
    description: "A training runtime TrainingJobs run on (Beta)."
  },
  // "listed as project kinds with the full operation set including all-projects list".
  { kind: "Secret", plural: "secrets", operations: fullOps, description: "Named, versioned secret values." },
  {
    kind: "ServiceAccount",
    plural: "serviceaccounts",
    shortNames: ["sa"],
    operations: fullOps,
    description: "An identity with scopes that API keys and workloads act as."
  },
  {
    kind: "Volume",
    plural: "volumes",
    shortNames: ["vol"],
    operations: fullOps,
    description: "Persistent storage with revisions."
  },
  {
    kind: "Pipeline",
    plural: "pipelines",
    shortNames: ["pl"],
    operations: fullOps,
    description: "Stages of Jobs wired by their outputs."
  },
  {
    kind: "Model",
    plural: "models",
    shortNames: ["mdl"],
    operations: readOps,
    hasSpec: false,
    description: "A model known to the platform."
  },
  {
    kind: "PoolAction",
    plural: "poolactions",
    shortNames: ["pa"],
    operations: [...readOps, "patch", "getStatus", "writeStatus"],
    description: "An action proposed or taken on a Pool."
  },
  // The spec leaves the scope of nodes blank. A Node is a host of a customer Pool, and Pools are project kinds, so
  // nodes are namespaced too (docs/kinds.md).
  {
    kind: "Node",
    plural: "nodes",
    shortNames: ["no"],
    operations: [...readOps, "delete", "patch", "getStatus", "writeStatus"],
    description: "A host enrolled in a Pool."
  },
  // Offerings are the platform's public catalog and top-ups fund the whole account: both are cluster-scoped.
  {
    kind: "Offering",
    plural: "offerings",
    shortNames: ["off"],
    scope: "Cluster",
    operations: readOps,
    hasSpec: false,
    state: shown("Available", "status.available", "Whether capacity of the offering can be had now"),
    columns: [
      wide("Accelerator", "spec.accelerator", "Accelerator of its GPUs"),
      wide("GPUs", "spec.count", "GPUs per host", "integer"),
      wide("Region", "spec.regionClass", "Region class"),
      { ...wide("On demand", "spec.onDemandRateUSDPerHour", "Rate per host-hour on demand"), format: "usd" },
      {
        ...wide("Interruptible", "spec.interruptibleRateUSDPerHour", "Rate per host-hour of the interruptible variant"),
        format: "usd"
      }
    ],
    description: "A purchasable capacity shape with its rates."
  },
  {
    kind: "TopUp",
    plural: "topups",
    shortNames: ["tu"],
    scope: "Cluster",
    operations: [...readOps, "create"],
    columns: [{ ...shown("Amount", "spec.amountUSD", "USD charged and added as credits"), format: "usd" }],
    scopePrefix: "billing",
    description: "A payment that adds credits."
  },
  {
    kind: "ReservedHost",
    plural: "reservedhosts",
    shortNames: ["rh"],
    operations: readOps,
    description: "A host reserved for the project."
  }
]

const singularOf = (kind: string): string => kind.toLowerCase()

const toInfo = (row: KindRow): KindInfo => ({
  kind: row.kind,
  plural: row.plural,
  singular: singularOf(row.kind),
  version: row.version ?? "v1",
  scope: row.scope ?? "Namespaced",
  shortNames: row.shortNames ?? [],
  operations: new Set(row.operations),
  hasSpec: row.hasSpec ?? true,
  ...(row.costPath === undefined ? {} : { costPath: row.costPath }),
  columns: row.columns ?? [],
  ...(row.state === undefined ? {} : { state: row.state }),
  scopePrefix: row.scopePrefix ?? row.plural,
  description: row.description
})

/** Every kind, in the spec's order. */
export const kinds: ReadonlyArray<KindInfo> = rows.map(toInfo)

/**
 * Projects are Kubernetes Namespaces in the core group (spec: a project is the `namespace` segment of a path), served
 * at /api/v1/namespaces so that `kubectl create namespace` works. They are not in the `nodus` category.
 */
export const namespaceKind: KindInfo = {
  kind: "Namespace",
  plural: "namespaces",
  singular: "namespace",
  version: "v1",
  scope: "Cluster",
  shortNames: ["ns"],
  operations: new Set<Operation>(["list", "watch", "create", "get", "delete"]),
  hasSpec: false,
  columns: [],
  scopePrefix: "namespaces",
  description: "A project: the scope of namespaced objects."
}

/**
 * Events are Kubernetes core/v1 Events (spec: Events — "objects that can be read through the API also record events
 * (listed by an events command)"), served at /api/v1/namespaces/{namespace}/events so that `kubectl get events` and
 * `kubectl describe` find them. Only the service writes them (docs/simulator.md); clients read them with `events:read`.
 */
export const eventKind: KindInfo = {
  kind: "Event",
  plural: "events",
  singular: "event",
  version: "v1",
  scope: "Namespaced",
  shortNames: ["ev"],
  operations: new Set<Operation>(["list", "listAll", "watch", "get"]),
  hasSpec: false,
  columns: [],
  scopePrefix: "events",
  description: "Something that happened to an object, recorded by the service (a core/v1 Event)."
}

/** The kinds of the core group ("" in paths /api/v1), served beside the nodus group's. */
export const coreKinds: ReadonlyArray<KindInfo> = [namespaceKind, eventKind]

const byPlural = new Map(kinds.map((info) => [info.plural, info]))
const byKind = new Map([...kinds, ...coreKinds].map((info) => [info.kind, info]))

/** The kind served under `plural` in `version`, if any. */
export const byResource = (version: string, plural: string): KindInfo | undefined => {
  const info = byPlural.get(plural)
  return info !== undefined && info.version === version ? info : undefined
}

/** The kind with this plural in any version (the store keys objects by plural). */
export const byPluralName = (plural: string): KindInfo | undefined => byPlural.get(plural)

/** The kind named `kind` (as objects carry it), the core group's Namespace and Event included. */
export const byKindName = (kind: string): KindInfo | undefined => byKind.get(kind)

export const versions: ReadonlyArray<Version> = ["v1", "v1beta1"]

export const kindsIn = (version: Version): ReadonlyArray<KindInfo> => kinds.filter((info) => info.version === version)

/** `<group>/<version>` of a kind. */
export const apiVersionOf = (group: string, info: KindInfo): string => `${group}/${info.version}`

/**
 * A served kind as a request or a controller names it: the registry entry, the group it is served under ("" for the
 * core group of Namespaces and Events) and the apiVersion objects of it carry.
 */
export interface ResourceRef {
  readonly info: KindInfo
  readonly group: string
  readonly apiVersion: string
}

/** The ref of a nodus kind served under `group`. */
export const refOf = (group: string, info: KindInfo): ResourceRef => ({
  info,
  group,
  apiVersion: apiVersionOf(group, info)
})

/** The ref of the nodus kind named `kind` (a registered kind: an unknown name is a bug). */
export const refOfKind = (group: string, kind: string): ResourceRef => {
  const info = byKind.get(kind)
  if (info === undefined) throw new Error(`unknown kind ${kind}`)
  return refOf(group, info)
}

/** The refs of the core group's kinds. */
export const namespaceRef: ResourceRef = { info: namespaceKind, group: "", apiVersion: "v1" }
export const eventRef: ResourceRef = { info: eventKind, group: "", apiVersion: "v1" }

/** The ref an object of `kind` is stored under (`group` for nodus kinds), if the kind is served. */
export const refOfObjectKind = (group: string, kind: string): ResourceRef | undefined => {
  if (kind === namespaceKind.kind) return namespaceRef
  if (kind === eventKind.kind) return eventRef
  const info = byKind.get(kind)
  return info === undefined ? undefined : refOf(group, info)
}
