/**
 * The registry of every kind the resource API serves: its names, scope, group version, the operations the spec's
 * "Availability by kind" table grants it, and how `kubectl get` prints it. Each kind writes its row in its
 * own folder (src/kinds/<kind>/<Kind>Schema.ts) and src/kinds/Kinds.ts lists them: discovery, routing, scope
 * checks, OpenAPI and Table output all read that one list, so a kind is declared once.
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

export const readOps: ReadonlyArray<Operation> = ["list", "listAll", "watch", "get"]
/** "list (project and all projects), create, read, replace, delete, patch, read status". */
export const fullOps: ReadonlyArray<Operation> = [
  ...readOps,
  "create",
  "replace",
  "patch",
  "delete",
  "getStatus",
  "writeStatus"
]

/** A kind's row as its folder writes it (src/kinds/<kind>/<Kind>Schema.ts); `kindInfo` fills in the defaults. */
export interface KindRow {
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

export const wide = (name: string, path: string, description: string, type: Column["type"] = "string"): Column => ({
  name,
  type,
  path,
  priority: 1,
  description
})
export const shown = (name: string, path: string, description: string, type: Column["type"] = "string"): Column => ({
  name,
  type,
  path,
  priority: 0,
  description
})

/** The status of one of the object's `status.conditions`. */
export const condition = (type: string, description: string): Column => ({
  ...shown(type, "status.conditions", description),
  condition: type
})

export const totalCost = "status.cost.totalUSD"

const singularOf = (kind: string): string => kind.toLowerCase()

/** A served kind's registry entry from its row, with the defaults filled in. */
export const kindInfo = (row: KindRow): KindInfo => ({
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

export const versions: ReadonlyArray<Version> = ["v1", "v1beta1"]

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

/** The refs of the core group's kinds. */
export const namespaceRef: ResourceRef = { info: namespaceKind, group: "", apiVersion: "v1" }
export const eventRef: ResourceRef = { info: eventKind, group: "", apiVersion: "v1" }
