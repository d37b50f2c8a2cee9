/**
 * WebhookEndpoint (spec: WebhookEndpoint, Events; cluster-scoped): a receiver of signed HTTPS callbacks for the events
 * it subscribes to. The module decides what a subscription may say — an https URL at a public address, event type
 * patterns in the Events grammar, the projects it covers — and the shape of what the service reports about deliveries
 * and secret rotations. Every spec field may change after create (spec: "Every field can change after create").
 * `WebhookEndpointRotation` is the body of POST …/webhookendpoints/{name}/rotations (spec: Webhook sub-resources).
 */
import { Schema } from "effect"
import * as Limits from "../../core/Limits.ts"
import { fieldInvalid } from "../../core/meta/ApiError.ts"
import { defaulted, described, duration, listOf, matching, oneOf, optional, uniqueBy } from "../../core/meta/Fields.ts"
import { condition, fullOps, kindInfo, wide } from "../../core/meta/Kinds.ts"
import { ProjectName } from "../../core/meta/ObjectMeta.ts"
import { isPublicAddress, parseAddress } from "../../core/PublicAddress.ts"
import type { KindDefinition, ServedKind } from "../../core/schemas/Kind.ts"
import { Condition, NonNegativeInt } from "../../core/schemas/Shared.ts"
import {
  dottedNameGrammar,
  ipv4Grammar,
  ipv6Grammar,
  portGrammar,
  restGrammar
} from "../connection/ConnectionSchema.ts"

// ---------------------------------------------------------------------------------------------------------------------
// The receiver URL (spec: WebhookEndpoint.url — "https only, public address"; Events, retry rule 3)

/** Host names that never name a public address (nodus: localhost, single labels, .local and .internal). */
const isNonPublicName = (host: string): boolean => {
  const name = host.endsWith(".") ? host.slice(0, -1) : host
  return name === "localhost" || name.endsWith(".localhost") || !name.includes(".") || name.endsWith(".local") ||
    name.endsWith(".internal")
}

/**
 * A development receiver: http or https to localhost, a `*.localhost` name or a loopback literal (127.0.0.0/8, [::1]).
 * The schema leaves it to the server: one started with `--webhook-allow-loopback` takes it, any other refuses it with
 * the message below (`serverRules`), as it refuses every other non-public URL.
 */
export const isDevelopmentUrl = (text: string): boolean => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return false
  }
  if (
    (url.protocol !== "https:" && url.protocol !== "http:") || url.username !== "" || url.password !== "" ||
    text.length > Limits.webhookUrlLengthMax
  ) return false
  const host = url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname
  return host === "localhost" || host.endsWith(".localhost") || host === "[::1]" ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/u.test(host)
}

/** Why `text` is not a receiver URL the service may call, or undefined when it is. */
export const webhookUrlProblem = (text: string): string | undefined => {
  if (text.length > Limits.webhookUrlLengthMax) return `must be at most ${Limits.webhookUrlLengthMax} characters`
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "must be an absolute https URL"
  }
  if (url.protocol !== "https:") return "must be an https URL"
  if (url.username !== "" || url.password !== "") return "must not carry a user name or password"
  // An IP literal is judged by the one rule of what is public (core/PublicAddress.ts); a name, here by what it says,
  // and by every address it resolves to when a delivery is made.
  const host = url.hostname
  const literal = host.startsWith("[") ? host.slice(1, -1) : parseAddress(host) === undefined ? undefined : host
  if (literal !== undefined) {
    return isPublicAddress(literal)
      ? undefined
      : "must be a public address, not a private, loopback or link-local one"
  }
  return isNonPublicName(host) ? "must be a public address, not localhost or a local name" : undefined
}

/**
 * The grammar of a receiver URL (the URI grammar Connection.uri uses): https, no user information, a host name of two
 * or more labels, a dotted-decimal IPv4 address or a bracketed IPv6 address, an optional port, and path, query and
 * fragment in printable ASCII (no spaces).
 */
export const webhookUrlPattern =
  `^https://(${dottedNameGrammar}|${ipv4Grammar}|\\[(${ipv6Grammar})\\])(:${portGrammar})?${restGrammar}$`

const webhookUrl = new RegExp(webhookUrlPattern, "u")

/**
 * A receiver URL. The public-address rules (webhookUrlProblem) are checked first, for their messages; then the
 * grammar, which the URL parser alone does not enforce (it drops surrounding spaces, reads "0x7f.1" as an address).
 * OpenAPI shows the grammar and the length bound; the public-address rules are beyond JSON Schema (an approximation).
 */
const WebhookUrl = Schema.String.check(Schema.makeFilter(
  (text: string) => {
    if (isDevelopmentUrl(text)) return undefined
    const problem = webhookUrlProblem(text) ??
      (webhookUrl.test(text)
        ? undefined
        : "must be an https URL of a DNS name with a dot, an IPv4 or a bracketed IPv6 address, an optional port, and a path without spaces")
    return problem === undefined ? undefined : `Invalid value: "${text}": ${problem}`
  },
  { toJsonSchema: () => [{ pattern: webhookUrlPattern, maxLength: Limits.webhookUrlLengthMax }, true] }
))

// ---------------------------------------------------------------------------------------------------------------------
// Event type patterns (spec: Events — "<kind>.<reason> in lowercase with underscores"; "an exact type, a prefix pattern
// (job.*) or *")

const eventTypePattern = /^(\*|[a-z][a-z0-9]*\.(\*|[a-z][a-z0-9]*(_[a-z0-9]+)*))$/u

const EventTypePattern = matching(
  eventTypePattern,
  "must be an event type <kind>.<reason> in lowercase with underscores (e.g. job.node_lost), a prefix pattern <kind>.* (e.g. billing.*), or *"
)

const distinct = <T extends string>(what: string) => uniqueBy<T>((item) => item, what)

const EventTypes = listOf(EventTypePattern, Limits.webhookEventTypesMax)
  .check(Schema.makeFilter(
    (types: ReadonlyArray<string>) =>
      types.length > 0 ? undefined : "Required value: at least one event type; * subscribes to every type",
    { toJsonSchema: () => ({ minItems: 1 }) }
  ))
  .check(distinct("event types"))

// ---------------------------------------------------------------------------------------------------------------------
// Spec

export const WebhookEndpointSpec = Schema.Struct({
  url: described(
    WebhookUrl,
    "Receiver URL: https only, a public address (no localhost, private, loopback or link-local address, no user name or password); redirects are not followed."
  ),
  eventTypes: defaulted(
    EventTypes,
    ["*"],
    "Event types delivered: an exact type (job.failed), a prefix pattern (job.*, billing.*) or *; default *."
  ),
  projects: optional(
    listOf(ProjectName, Limits.webhookProjectsMax).check(distinct("projects")),
    "Projects whose events are delivered; empty = every project. Organization-level events always match."
  ),
  enabled: defaulted(
    Schema.Boolean,
    true,
    "false pauses the endpoint; pending deliveries to a paused endpoint are dropped."
  ),
  description: optional(
    Schema.String.check(Schema.makeFilter(
      (text: string) =>
        text.length <= Limits.webhookDescriptionLengthMax
          ? undefined
          : `Too long: may not be more than ${Limits.webhookDescriptionLengthMax} characters`,
      { toJsonSchema: () => ({ maxLength: Limits.webhookDescriptionLengthMax }) }
    )),
    "What the endpoint is for."
  )
}).annotate({
  identifier: "WebhookEndpointSpec",
  description: "Where and which events are delivered (spec: WebhookEndpoint)."
})

// ---------------------------------------------------------------------------------------------------------------------
// Status

/** Delivery phases (spec: Events, retry rule 5). */
export const webhookDeliveryPhases = ["Pending", "Succeeded", "Failed", "Abandoned"] as const

const signingSecret = matching(/^whsec_[A-Za-z0-9+/]+={0,2}$/u, "must be whsec_ followed by the base64 key")

export const WebhookEndpointStatus = Schema.Struct({
  signingSecret: optional(
    signingSecret,
    "whsec_<base64 key>; present only in the create response and in a rotation response."
  ),
  lastDelivery: optional(
    Schema.Struct({
      id: optional(Schema.String, "The webhook-id of the delivery."),
      type: optional(Schema.String, "The event type."),
      time: optional(Schema.String, "When its last attempt was made."),
      phase: optional(oneOf(webhookDeliveryPhases), "Pending, Succeeded, Failed or Abandoned."),
      attempts: optional(NonNegativeInt, "Attempts made."),
      responseCode: optional(Schema.Int, "The receiver's last HTTP status code."),
      durationMs: optional(NonNegativeInt, "How long the last attempt took, in milliseconds.")
    }),
    "The most recent delivery."
  ),
  deliveries24h: optional(
    Schema.Struct({
      succeeded: described(NonNegativeInt, "Deliveries that succeeded in the last 24 hours."),
      failed: described(NonNegativeInt, "Deliveries that failed in the last 24 hours.")
    }),
    "Deliveries in the last 24 hours."
  ),
  failingSince: optional(Schema.String, "Set when the last three deliveries in a row failed; cleared by a success."),
  secretRotation: optional(
    Schema.String,
    "When the old secret stops signing after a rotation (the end of previousSecretTTL)."
  ),
  conditions: optional(
    Schema.Array(Condition),
    "Healthy is False with reason DeliveriesFailing after the last three deliveries in a row failed."
  ),
  observedGeneration: optional(Schema.Int, "The spec generation this status reflects.")
}).annotate({
  identifier: "WebhookEndpointStatus",
  description: "What the service observed of the WebhookEndpoint's deliveries."
})

/** The body of a rotation (spec: Webhook sub-resources — previousSecretTTL: duration, default 24h, at most 7 days). */
export const WebhookEndpointRotation = Schema.Struct({
  previousSecretTTL: defaulted(
    duration({ maximumMs: Limits.webhookPreviousSecretTtlMsMax }),
    Limits.webhookPreviousSecretTtlDefault,
    "How long the old secret keeps signing beside the new one; default 24h, at most 7 days (168h)."
  )
}).annotate({
  identifier: "WebhookEndpointRotation",
  description: "A signing-secret rotation (spec: Webhook sub-resources)."
})

export const webhookEndpoint: KindDefinition = {
  spec: WebhookEndpointSpec,
  status: WebhookEndpointStatus,
  // Spec: WebhookEndpoint — "Every field can change after create": no update rules.
  serverRules: (spec, settings) => {
    const url = spec["url"]
    if (settings.developmentWebhooks || typeof url !== "string" || !isDevelopmentUrl(url)) return []
    const problem = webhookUrlProblem(url) ?? "must be a public address"
    return [
      fieldInvalid(
        "spec.url",
        `Invalid value: "${url}": ${problem} (a receiver on loopback is taken only by a development server: nodus serve --webhook-allow-loopback)`
      )
    ]
  }
}

/**
 * How the API serves WebhookEndpoint (spec: Availability by kind) and its schema: its entry in the registry
 * (src/kinds/Kinds.ts).
 */
export const webhookEndpointServed: ServedKind = {
  info: kindInfo({
    kind: "WebhookEndpoint",
    plural: "webhookendpoints",
    shortNames: ["wh"],
    scope: "Cluster",
    operations: fullOps,
    state: condition("Healthy", "False after the last three deliveries in a row failed (its Healthy condition)"),
    columns: [wide("URL", "spec.url", "Receiver URL")],
    description: "A receiver of signed event deliveries."
  }),
  definition: webhookEndpoint
}
