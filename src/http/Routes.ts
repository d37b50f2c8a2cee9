/**
 * Which endpoint a request path names (spec: Endpoints). One pure parser for every path the server answers, so that
 * "unknown route" is a single case and 404 versus 405 is decided in one place.
 */

export type Route =
  | { readonly _tag: "Root" }
  | { readonly _tag: "Version" }
  | { readonly _tag: "Health"; readonly check: "healthz" | "readyz" | "livez" }
  | { readonly _tag: "CoreVersions" }
  | { readonly _tag: "CoreResources" }
  | { readonly _tag: "Groups" }
  | { readonly _tag: "Group"; readonly group: string }
  | { readonly _tag: "GroupVersion"; readonly group: string; readonly version: string }
  | { readonly _tag: "OpenApiIndex" }
  | { readonly _tag: "OpenApiGroupVersion"; readonly group: string; readonly version: string }
  | { readonly _tag: "OpenApiCore" }
  | { readonly _tag: "OpenApiV2" }
  | { readonly _tag: "ErrorDocs"; readonly code?: string }
  /** The node agent protocol (docs/live.md): /agent/v1/<call>, authenticated by its own credentials. */
  | { readonly _tag: "Agent"; readonly call: (typeof agentCalls)[number] }
  /** The sim backend's test clock (docs/simulator.md): /apis/{group}/{version}/simulation/clock. */
  | { readonly _tag: "SimulationClock"; readonly group: string; readonly version: string }
  /** The operator's credit operations (docs/billing.md, "Credits"): /apis/{group}/{version}/operator/<path>. */
  | {
    readonly _tag: "Operator"
    readonly group: string
    readonly version: string
    readonly path: ReadonlyArray<string>
  }
  /** A collection, item or subresource of a kind. `namespace` is the project segment when the path has one. */
  | {
    readonly _tag: "Resource"
    readonly group: string
    readonly version: string
    readonly plural: string
    readonly namespace?: string
    readonly name?: string
    readonly subresource?: string
    /** The one segment below a subresource that has items (a Job's `outputs/{output}`, a Sandbox's `commands/{id}`). */
    readonly item?: string
    /** What is done to an item (a Sandbox command's `log`, `stdin` or `kill`). */
    readonly action?: string
  }
  /** A blob upload or read (docs/blobs.md): /blobs/v1/sha256:<hex>; the reference is checked by the handler. */
  | { readonly _tag: "Blob"; readonly reference: string }
  | { readonly _tag: "NotFound" }

const notFound: Route = { _tag: "NotFound" }

/** The calls of the node agent protocol (runtime/NodeAgents.ts). */
const agentCalls = ["enroll", "hello", "sync", "box", "run", "outputs", "inputs", "checkpoints", "restores"] as const

/**
 * The subresource segments that have items, by what follows them: `items`, one segment below (a Job's
 * `outputs/{output}`); `actions`, an item and what is done to it (a Sandbox's `commands/{id}/log`). Kinds register
 * them (src/http/KindApi.ts `KindRegistration.items`); every other subresource is one segment.
 */
export type ItemSubresources = ReadonlyMap<string, "items" | "actions">

const resource = (
  items: ItemSubresources,
  group: string,
  version: string,
  rest: ReadonlyArray<string>,
  namespace?: string
): Route => {
  const [plural, name, subresource, item, action, ...extra] = rest
  const shape = items.get(subresource ?? "")
  if (plural === undefined || extra.length > 0 || (item !== undefined && shape === undefined)) {
    return notFound
  }
  if (action !== undefined && shape !== "actions") return notFound
  return {
    _tag: "Resource",
    group,
    version,
    plural,
    ...(namespace === undefined ? {} : { namespace }),
    ...(name === undefined ? {} : { name }),
    ...(subresource === undefined ? {} : { subresource }),
    ...(item === undefined ? {} : { item }),
    ...(action === undefined ? {} : { action })
  }
}

const apis = (items: ItemSubresources, segments: ReadonlyArray<string>): Route => {
  const [group, version, ...rest] = segments
  if (group === undefined) return { _tag: "Groups" }
  if (version === undefined) return { _tag: "Group", group }
  if (rest.length === 0) return { _tag: "GroupVersion", group, version }
  if (rest.length === 2 && rest[0] === "simulation" && rest[1] === "clock") {
    return { _tag: "SimulationClock", group, version }
  }
  if (rest[0] === "operator") return { _tag: "Operator", group, version, path: rest.slice(1) }
  if (rest[0] === "namespaces" && rest.length >= 3) return resource(items, group, version, rest.slice(2), rest[1])
  return resource(items, group, version, rest)
}

const core = (items: ItemSubresources, segments: ReadonlyArray<string>): Route => {
  const [version, ...rest] = segments
  if (version === undefined) return { _tag: "CoreVersions" }
  if (version !== "v1") return notFound
  if (rest.length === 0) return { _tag: "CoreResources" }
  // Events live in projects (/namespaces/{ns}/events[/name]) and are listed across them (/events).
  if (rest[0] === "events") return rest.length <= 2 ? resource(items, "", "v1", rest) : notFound
  if (rest[0] === "namespaces" && rest[2] === "events") {
    return rest.length <= 4
      ? resource(items, "", "v1", rest.slice(2), rest[1])
      : notFound
  }
  return rest[0] === "namespaces" && rest.length <= 3 ? resource(items, "", "v1", rest) : notFound
}

const openApi = (segments: ReadonlyArray<string>): Route => {
  const [version, ...rest] = segments
  if (version === "v2" && rest.length === 0) return { _tag: "OpenApiV2" }
  if (version !== "v3") return notFound
  if (rest.length === 0) return { _tag: "OpenApiIndex" }
  if (rest[0] === "apis" && rest.length === 3) {
    return { _tag: "OpenApiGroupVersion", group: rest[1]!, version: rest[2]! }
  }
  if (rest[0] === "api" && rest[1] === "v1" && rest.length === 2) return { _tag: "OpenApiCore" }
  return notFound
}

/**
 * The route of a request path (without query), given the subresources that have items. Percent-escapes are decoded
 * per segment.
 */
export const parse = (path: string, items: ItemSubresources): Route => {
  let segments: Array<string>
  try {
    segments = path.split("/").filter((segment) => segment !== "").map(decodeURIComponent)
  } catch {
    return notFound
  }
  const [first, ...rest] = segments
  switch (first) {
    case undefined:
      return { _tag: "Root" }
    case "version":
      return rest.length === 0 ? { _tag: "Version" } : notFound
    case "healthz":
    case "readyz":
    case "livez":
      return rest.length === 0 ? { _tag: "Health", check: first } : notFound
    case "agent":
      return rest.length === 2 && rest[0] === "v1" && agentCalls.includes(rest[1] as never)
        ? { _tag: "Agent", call: rest[1] as (typeof agentCalls)[number] }
        : notFound
    case "api":
      return core(items, rest)
    case "apis":
      return apis(items, rest)
    case "openapi":
      return openApi(rest)
    case "blobs":
      return rest.length === 2 && rest[0] === "v1" ? { _tag: "Blob", reference: rest[1]! } : notFound
    case "docs":
      return rest[0] === "errors" && rest.length <= 2
        ? { _tag: "ErrorDocs", ...(rest[1] === undefined ? {} : { code: rest[1] }) }
        : notFound
    default:
      return notFound
  }
}

/** Paths listed by GET / (as Kubernetes lists its root paths). */
export const rootPaths = (group: string): ReadonlyArray<string> => [
  "/api",
  "/api/v1",
  "/apis",
  `/apis/${group}`,
  `/apis/${group}/v1`,
  `/apis/${group}/v1beta1`,
  "/docs/errors",
  "/healthz",
  "/livez",
  "/openapi/v3",
  "/readyz",
  "/version"
]
