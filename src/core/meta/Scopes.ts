/**
 * The scope vocabulary (spec: Authentication 2 — scopes are checked per operation; docs/auth.md): `admin`, and
 * `<prefix>:read|write` for each kind's scope prefix (billing kinds share "billing"), projects, and `*` for every
 * kind. The list is finite, so a ServiceAccount's schema enumerates it and admission, OpenAPI and test data agree.
 */
import { coreKinds } from "./Kinds.ts"

export const adminScope = "admin"

export const accessLevels = ["read", "write"] as const

/** The scope prefix of blob transfers through /blobs/v1 (docs/blobs.md), which are no kind's. */
export const blobScopePrefix = "blobs"

/**
 * Scope prefixes: one per kind (billing kinds share "billing"), plus the core group's namespaces and events, and
 * blobs.
 */
export const scopePrefixes: ReadonlySet<string> = new Set([
  // Each served kind's prefix (its plural, or "billing" for the billing kinds), written out rather than read from the
  // registry (src/kinds/Kinds.ts): the ServiceAccount's schema, itself in the registry, enumerates the scopes.
  // test/kinds/Kinds.test.ts holds this list equal to the registry's.
  ...["agentgroups", "agentruns", "agents", "apps", "connections", "environments", "functioncalls", "functions"],
  ...["images", "inferenceendpoints", "jobs", "sandboxes", "workspaces", "sweeps", "pools", "attempts"],
  ...["enrollmenttokens", "billing", "cloudaccounts", "marketplaceentries", "webhookendpoints"],
  ...["marketplacecontracts", "trainingjobs", "trainingruntimes", "secrets", "serviceaccounts", "volumes"],
  ...["pipelines", "models", "poolactions", "nodes", "offerings", "reservedhosts"],
  ...coreKinds.map((info) => info.scopePrefix),
  blobScopePrefix
])

/** Every scope a ServiceAccount may hold, admin first. */
export const knownScopes: ReadonlyArray<string> = [
  adminScope,
  ...["*", ...[...scopePrefixes].sort()].flatMap((prefix) => accessLevels.map((access) => `${prefix}:${access}`))
]

const known: ReadonlySet<string> = new Set(knownScopes)

/** Whether a string is a scope nodus knows. */
export const isKnownScope = (scope: string): boolean => known.has(scope)
