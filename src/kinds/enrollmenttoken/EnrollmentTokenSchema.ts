/**
 * EnrollmentToken (spec: Areas "Accounts and billing", error EnrollmentTokenInvalid): a token a host presents to enroll
 * as a Node of a Pool. It is created, read and deleted (no replace or patch), so nothing changes after create. The
 * spec does not show its fields: this schema is nodus's own (docs/kinds/EnrollmentToken.md) — which Pool, how long
 * the token lives and how many hosts it may enroll, with defaults (24h, one host) that keep an unused token harmless.
 * The token itself is in `status.token` in the create response only; the write path strips it from every later read.
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { defaulted, described, duration, intBetween, nonEmpty, oneOf, optional } from "../../core/meta/Fields.ts"
import { kindInfo, readOps } from "../../core/meta/Kinds.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { NonNegativeInt, Timestamp } from "../../core/schemas/Shared.ts"

/** EnrollmentToken phases (nodus's own value set, docs/kinds/EnrollmentToken.md). */
export const enrollmentTokenPhases = ["Active", "Expired", "Exhausted"] as const

export const EnrollmentTokenSpec = Schema.Struct({
  pool: described(nonEmpty, "The Pool hosts enrolled with the token join."),
  expiresAfter: defaulted(
    duration({
      minimumMs: Limits.enrollmentTokenExpiresAfterMsMin,
      maximumMs: Limits.enrollmentTokenExpiresAfterMsMax
    }),
    Limits.enrollmentTokenExpiresAfterDefault,
    "How long after creation the token enrolls hosts, 1m to 720h; default 24h."
  ),
  maxUses: defaulted(
    intBetween(1, Limits.enrollmentTokenMaxUsesMax),
    Limits.enrollmentTokenMaxUsesDefault,
    "Hosts the token may enroll, 1 to 1000; default 1."
  )
}).annotate({ identifier: "EnrollmentTokenSpec", description: "A token that enrolls hosts into a Pool." })

export const EnrollmentTokenStatus = Schema.Struct({
  token: optional(nonEmpty, "The token; shown once, in the create response."),
  phase: optional(
    oneOf(enrollmentTokenPhases),
    "Active, Expired (past expirationTime) or Exhausted (maxUses reached)."
  ),
  expirationTime: optional(Timestamp, "When the token stops enrolling hosts (creation + expiresAfter)."),
  uses: optional(NonNegativeInt, "Hosts enrolled with it."),
  nodes: optional(Schema.Array(Schema.String), "The Nodes enrolled with it.")
}).annotate({ identifier: "EnrollmentTokenStatus", description: "The token, once, and its use." })

export const enrollmentToken: KindDefinition = {
  spec: EnrollmentTokenSpec,
  status: EnrollmentTokenStatus,
  // Spec: Availability — enrollmenttokens have no replace or patch; nothing changes after create.
  updates: { mutable: [] }
}

/**
 * How the API serves EnrollmentToken (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const enrollmentTokenServed: ServedKind = {
  info: kindInfo({
    kind: "EnrollmentToken",
    plural: "enrollmenttokens",
    shortNames: ["et"],
    operations: [...readOps, "create", "delete"],
    description: "A token that enrolls a customer host into a Pool."
  }),
  definition: enrollmentToken
}
