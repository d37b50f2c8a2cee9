// API discovery documents: /version, the legacy /api, /apis and /apis/{group}/{version} lists, and the aggregated
// apidiscovery.k8s.io/v2 form of /api and /apis. kubectl and the Python DynamicClient learn every resource name,
// scope and verb from these bodies before they send a single resource request, so they are rendered from the kind
// registry (Kinds.ts) and never written by hand.
//
// Besides the nodus group, the core group v1 serves `namespaces`: projects are Namespaces, and kubectl probes
// `/api/v1/namespaces/<ns>` to word its NotFound errors (kubectl-compat §1.4). Pure: no I/O, no clock.

import type { JsonObject } from "../core/Json.ts"
import { category, eventKind, namespaceKind, versions } from "../core/meta/Kinds.ts"
import type { KindInfo, Operation, Version } from "../core/meta/Kinds.ts"
import { kindsIn } from "../kinds/Kinds.ts"

/**
 * The core v1 Namespace resource (Kinds.ts `namespaceKind`). Projects are Namespaces served at /api/v1/namespaces;
 * they are not nodus kinds, so they carry no category and `kubectl get nodus` does not list them.
 */
export const namespaceResource = namespaceKind

/**
 * The body of GET /version. Minor "32" pins the gcloud kubectl dispatcher to kubectl 1.32, the version the
 * compatibility guide was verified with (kubectl-compat §1.3); the Python client refuses to start without it (§2).
 */
export const versionInfo = (): JsonObject => ({
  major: "1",
  minor: "32",
  gitVersion: "v1.32.0-nodus",
  gitCommit: "",
  gitTreeState: "clean",
  buildDate: "",
  goVersion: "",
  compiler: "nodus",
  platform: "linux/amd64"
})

/** The Content-Type that makes kubectl read /api and /apis as aggregated discovery (kubectl-compat §2: exact match). */
export const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

/** One Kubernetes representation a client may ask for with `Accept: application/json;as=…;g=…;v=…`. */
export interface AcceptedForm {
  readonly as: string
  readonly group: string
  readonly versions: ReadonlyArray<string>
}

/**
 * Whether an Accept header lists the given `as=` representation: a JSON media range whose `as`, `g` and `v`
 * parameters match (`v` being one of `versions`). Parameter names are case-insensitive and whitespace is ignored,
 * as RFC 9110 §12.5.1 allows; a range with `q=0` is a refusal and does not count.
 */
export const acceptsForm = (accept: string | undefined, form: AcceptedForm): boolean =>
  accept !== undefined && accept.split(",").some((range) => rangeMatches(range, form))

const rangeMatches = (range: string, form: AcceptedForm): boolean => {
  const [mediaType = "", ...parameterTexts] = range.split(";").map((part) => part.trim())
  if (mediaType.toLowerCase() !== "application/json") return false
  const parameters = new Map(parameterTexts.map((text) => {
    const separator = text.indexOf("=")
    return separator < 0
      ? [text.toLowerCase(), ""]
      : [text.slice(0, separator).trim().toLowerCase(), text.slice(separator + 1).trim()]
  }))
  const quality = parameters.get("q")
  if (quality !== undefined && Number(quality) === 0) return false
  return parameters.get("as") === form.as && parameters.get("g") === form.group &&
    form.versions.includes(parameters.get("v") ?? "")
}

/**
 * Whether the client asked for the aggregated v2 APIGroupDiscoveryList. kubectl lists it first in its Accept header
 * on /api and /apis (kubectl-compat §2); the Python client never does and gets the legacy lists.
 */
export const wantsAggregated = (accept: string | undefined): boolean =>
  acceptsForm(accept, { as: "APIGroupDiscoveryList", group: "apidiscovery.k8s.io", versions: ["v2"] })

// Discovery verbs per registry operation. `deletecollection` is never advertised because no such operation is
// served; `listAll` is the same "list" verb on the all-projects path.
const verbOf: Readonly<Record<Operation, string | undefined>> = {
  list: "list",
  listAll: "list",
  watch: "watch",
  create: "create",
  get: "get",
  replace: "update",
  patch: "patch",
  delete: "delete",
  getStatus: undefined,
  writeStatus: undefined
}

/** The discovery verbs of a resource, sorted as the Kubernetes API server sorts them. */
export const verbsOf = (operations: ReadonlySet<Operation>): ReadonlyArray<string> => {
  const verbs = new Set<string>()
  for (const operation of operations) {
    const verb = verbOf[operation]
    if (verb !== undefined) verbs.add(verb)
  }
  return [...verbs].sort()
}

/**
 * The verbs of the `status` subresource, or undefined when the resource has none: reading status needs
 * `getStatus`, and `writeStatus` adds PATCH and PUT (kubectl-compat §2: Python needs the entry to patch status).
 */
export const statusVerbsOf = (operations: ReadonlySet<Operation>): ReadonlyArray<string> | undefined => {
  if (!operations.has("getStatus")) return undefined
  return operations.has("writeStatus") ? ["get", "patch", "update"] : ["get"]
}

/** What one discovery entry needs to know: the resource, where it is served and whether it is in our category. */
interface Served {
  readonly resource: Pick<KindInfo, "kind" | "plural" | "singular" | "scope" | "shortNames" | "operations">
  readonly group: string
  readonly version: string
  readonly categories: ReadonlyArray<string>
}

const servedKind = (group: string, info: KindInfo): Served => ({
  resource: info,
  group,
  version: info.version,
  categories: [category]
})

const servedNamespaces: Served = { resource: namespaceResource, group: "", version: "v1", categories: [] }

// Events (Kinds.ts `eventKind`) are core/v1 like namespaces, so `kubectl get events` and `describe` find them.
const servedEvents: Served = { resource: eventKind, group: "", version: "v1", categories: [] }

/** The group versions that hold at least one kind; an empty one would defeat kubectl's cache (kubectl-compat §1.6). */
const servedVersions = (): ReadonlyArray<Version> => versions.filter((version) => kindsIn(version).length > 0)

const groupVersion = (group: string, version: string): string => (group === "" ? version : `${group}/${version}`)

// Empty shortNames and categories are left out, as the Kubernetes API server's omitempty does.
const namesOf = (served: Served): JsonObject => ({
  ...(served.resource.shortNames.length === 0 ? {} : { shortNames: served.resource.shortNames }),
  ...(served.categories.length === 0 ? {} : { categories: served.categories })
})

/** The legacy APIResource entries of one resource: itself and, when it has one, `<plural>/status`. */
const legacyResources = (served: Served): ReadonlyArray<JsonObject> => {
  const { resource } = served
  const namespaced = resource.scope === "Namespaced"
  const main: JsonObject = {
    name: resource.plural,
    singularName: resource.singular,
    namespaced,
    kind: resource.kind,
    verbs: verbsOf(resource.operations),
    ...namesOf(served)
  }
  const statusVerbs = statusVerbsOf(resource.operations)
  if (statusVerbs === undefined) return [main]
  return [main, {
    name: `${resource.plural}/status`,
    singularName: "",
    namespaced,
    kind: resource.kind,
    verbs: statusVerbs
  }]
}

/** GET /api: the legacy APIVersions of the core group, which serves v1 (namespaces). */
export const coreVersions = (): JsonObject => ({
  kind: "APIVersions",
  versions: ["v1"],
  serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "" }]
})

/** GET /api/v1: the legacy APIResourceList of the core group: namespaces and events. */
export const coreResourceList = (): JsonObject => ({
  kind: "APIResourceList",
  apiVersion: "v1",
  groupVersion: "v1",
  resources: [...legacyResources(servedNamespaces), ...legacyResources(servedEvents)]
})

/** The legacy APIGroup body of the nodus group, without kind and apiVersion (as it appears inside APIGroupList). */
const groupBody = (group: string): JsonObject => {
  const entries = servedVersions().map((version) => ({ groupVersion: groupVersion(group, version), version }))
  // Python's DynamicClient matches preferredVersion against the versions list by equality (kubectl-compat §2).
  return {
    name: group,
    versions: entries,
    preferredVersion: { groupVersion: groupVersion(group, "v1"), version: "v1" }
  }
}

/** GET /apis: the legacy APIGroupList with the one nodus group, v1 preferred. */
export const groupList = (group: string): JsonObject => ({
  kind: "APIGroupList",
  apiVersion: "v1",
  groups: [groupBody(group)]
})

/** GET /apis/{group}: the legacy APIGroup (kubectl and Python never ask for it, but the Kubernetes API serves it). */
export const group = (group: string): JsonObject => ({ kind: "APIGroup", apiVersion: "v1", ...groupBody(group) })

/** GET /apis/{group}/{version}: the legacy APIResourceList of one group version, `<plural>/status` entries included. */
export const resourceList = (group: string, version: Version): JsonObject => ({
  kind: "APIResourceList",
  apiVersion: "v1",
  groupVersion: groupVersion(group, version),
  resources: kindsIn(version).flatMap((info) => legacyResources(servedKind(group, info)))
})

/** The aggregated APIResourceDiscovery entry of one resource, with its status subresource when it has one. */
const aggregatedResource = (served: Served): JsonObject => {
  const { resource } = served
  const responseKind = { group: served.group, version: served.version, kind: resource.kind }
  const statusVerbs = statusVerbsOf(resource.operations)
  return {
    resource: resource.plural,
    responseKind,
    scope: resource.scope,
    singularResource: resource.singular,
    verbs: verbsOf(resource.operations),
    ...namesOf(served),
    ...(statusVerbs === undefined
      ? {}
      : { subresources: [{ subresource: "status", responseKind, verbs: statusVerbs }] })
  }
}

const discoveryList = (items: ReadonlyArray<JsonObject>): JsonObject => ({
  kind: "APIGroupDiscoveryList",
  apiVersion: "apidiscovery.k8s.io/v2",
  metadata: {},
  items
})

/**
 * GET /apis in the aggregated form: one APIGroupDiscovery for the nodus group whose versions are listed v1 first,
 * since kubectl takes the first listed version as the preferred one (kubectl-compat §2). Send it with
 * `aggregatedContentType`, or kubectl reads it as an empty legacy list.
 */
export const aggregatedGroups = (group: string): JsonObject =>
  discoveryList([{
    metadata: { name: group },
    versions: servedVersions().map((version) => ({
      version,
      freshness: "Current",
      resources: kindsIn(version).map((info) => aggregatedResource(servedKind(group, info)))
    }))
  }])

/**
 * GET /api in the aggregated form: the core "" group with v1 namespaces and events. It is not empty, because kubectl
 * would otherwise rerun discovery on every call (kubectl-compat §1.6), and namespaces are served.
 */
export const aggregatedCore = (): JsonObject =>
  discoveryList([{
    metadata: { name: "" },
    versions: [{
      version: "v1",
      freshness: "Current",
      resources: [aggregatedResource(servedNamespaces), aggregatedResource(servedEvents)]
    }]
  }])
