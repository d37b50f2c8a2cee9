/**
 * The WebhookEndpoint's admission rules (spec: WebhookEndpoint, Events, Webhook sub-resources; nodus's own bounds in
 * docs/kinds/WebhookEndpoint.md), one row per rule, then its update rules (every field may change), the rotation body
 * and the status the service writes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { admit } from "../../../src/core/meta/Admission.ts"
import { webhookEndpoint, WebhookEndpointRotation } from "../../../src/kinds/webhookendpoint/WebhookEndpointSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { url: "https://hooks.example.com/nodus" }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })

const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no url", { eventTypes: ["*"] }, "spec.url"],
  ["an http url", spec({ url: "http://hooks.example.com/nodus" }), "spec.url"],
  ["a url that is no URL", spec({ url: "hooks.example.com/nodus" }), "spec.url"],
  ["a url with a user name and password", spec({ url: "https://user:pw@hooks.example.com/" }), "spec.url"],
  ["a url with a user name", spec({ url: "https://user@hooks.example.com/" }), "spec.url"],
  ["localhost", spec({ url: "https://localhost:8443/hook" }), "spec.url"],
  ["localhost with a trailing dot", spec({ url: "https://localhost./hook" }), "spec.url"],
  ["a .localhost name", spec({ url: "https://app.localhost/hook" }), "spec.url"],
  ["a single-label name", spec({ url: "https://intranet/hook" }), "spec.url"],
  ["a .internal name", spec({ url: "https://metadata.google.internal/" }), "spec.url"],
  ["a loopback IPv4", spec({ url: "https://127.0.0.1/hook" }), "spec.url"],
  ["a loopback IPv4 written in hex", spec({ url: "https://0x7f.1/hook" }), "spec.url"],
  ["a loopback IPv4 written as one number", spec({ url: "https://2130706433/hook" }), "spec.url"],
  ["a 10/8 address", spec({ url: "https://10.1.2.3/hook" }), "spec.url"],
  ["a 172.16/12 address (upper edge)", spec({ url: "https://172.31.255.255/hook" }), "spec.url"],
  ["a 192.168/16 address", spec({ url: "https://192.168.1.10/hook" }), "spec.url"],
  ["a link-local IPv4 (cloud metadata)", spec({ url: "https://169.254.169.254/latest" }), "spec.url"],
  ["a shared (CGNAT) address", spec({ url: "https://100.64.0.1/hook" }), "spec.url"],
  ["0.0.0.0", spec({ url: "https://0.0.0.0/hook" }), "spec.url"],
  ["a multicast IPv4", spec({ url: "https://224.0.0.1/hook" }), "spec.url"],
  ["the IPv6 loopback", spec({ url: "https://[::1]/hook" }), "spec.url"],
  ["the IPv6 loopback written in full", spec({ url: "https://[0:0:0:0:0:0:0:1]/hook" }), "spec.url"],
  ["an IPv6 link-local address", spec({ url: "https://[fe80::1]/hook" }), "spec.url"],
  ["an IPv6 unique local address", spec({ url: "https://[fd12:3456::1]/hook" }), "spec.url"],
  ["an IPv4-mapped private address", spec({ url: "https://[::ffff:10.0.0.1]/hook" }), "spec.url"],
  // The webhooks issue's table: forms admission let through before core/PublicAddress.ts was its rule.
  ["an IPv4-compatible loopback", spec({ url: "https://[::127.0.0.1]/hook" }), "spec.url"],
  ["NAT64 of loopback", spec({ url: "https://[64:ff9b::7f00:1]/hook" }), "spec.url"],
  ["6to4 of loopback", spec({ url: "https://[2002:7f00:1::1]/hook" }), "spec.url"],
  ["an IETF protocol assignment (192.0.0.0/24)", spec({ url: "https://192.0.0.1/hook" }), "spec.url"],
  ["a documentation address (192.0.2.0/24)", spec({ url: "https://192.0.2.1/hook" }), "spec.url"],
  ["a url with a trailing space", spec({ url: "https://hooks.example.com/nodus " }), "spec.url"],
  ["a url with a leading space", spec({ url: " https://hooks.example.com/nodus" }), "spec.url"],
  ["a url with a space in its path", spec({ url: "https://hooks.example.com/no dus" }), "spec.url"],
  ["a public IPv4 written in hex", spec({ url: "https://0x8.8.8.8/hook" }), "spec.url"],
  ["a url whose port is out of range", spec({ url: "https://hooks.example.com:65536/hook" }), "spec.url"],
  [
    "a host name that is not ASCII (not in its xn-- form)",
    spec({ url: "https://bücher.example.com/hook" }),
    "spec.url"
  ],
  ["an upper-case scheme", spec({ url: "HTTPS://hooks.example.com/hook" }), "spec.url"],
  ["a url longer than 2048 characters", spec({ url: `https://hooks.example.com/${"a".repeat(2_023)}` }), "spec.url"],
  ["no event types", spec({ eventTypes: [] }), "spec.eventTypes"],
  ["65 event types", spec({ eventTypes: Array.from({ length: 65 }, (_, i) => `kind${i}.done`) }), "spec.eventTypes"],
  ["an event type with capitals", spec({ eventTypes: ["Job.failed"] }), "spec.eventTypes[0]"],
  ["an event type without a reason", spec({ eventTypes: ["job"] }), "spec.eventTypes[0]"],
  ["an event type with a dash", spec({ eventTypes: ["job.node-lost"] }), "spec.eventTypes[0]"],
  ["an event type with a trailing underscore", spec({ eventTypes: ["job.failed_"] }), "spec.eventTypes[0]"],
  ["a suffix pattern", spec({ eventTypes: ["*.failed"] }), "spec.eventTypes[0]"],
  ["a pattern inside the reason", spec({ eventTypes: ["job.check*"] }), "spec.eventTypes[0]"],
  ["three segments", spec({ eventTypes: ["job.failed.now"] }), "spec.eventTypes[0]"],
  ["an event type twice", spec({ eventTypes: ["job.failed", "job.failed"] }), "spec.eventTypes[1]"],
  ["a project that is no DNS label", spec({ projects: ["My_Project"] }), "spec.projects[0]"],
  ["a project twice", spec({ projects: ["ml", "ml"] }), "spec.projects[1]"],
  ["257 projects", spec({ projects: Array.from({ length: 257 }, (_, i) => `p${i}`) }), "spec.projects"],
  ["enabled that is not a boolean", spec({ enabled: "yes" }), "spec.enabled"],
  ["a description over 1024 characters", spec({ description: "d".repeat(1_025) }), "spec.description"],
  ["an unknown field", spec({ secret: "whsec_abc" }), "spec.secret"]
]

describe("WebhookEndpoint admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(webhookEndpoint, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults: every event type, enabled", () => {
    const admission = admitSpec(webhookEndpoint, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") {
      assert.deepStrictEqual(admission.spec, { ...base, eventTypes: ["*"], enabled: true })
    }
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ url: `https://hooks.example.com/${"a".repeat(2_022)}` }),
      spec({
        eventTypes: Array.from({ length: 64 }, (_, i) => `kind${i}.done`),
        projects: Array.from({ length: 256 }, (_, i) => `p${i}`)
      }),
      spec({
        eventTypes: [
          "*",
          "billing.*",
          "job.node_lost",
          "webhookendpoint.deliveries_failing",
          "billing.auto_recharge_succeeded"
        ]
      }),
      spec({ description: "d".repeat(1_024), enabled: false, projects: [] }),
      spec({ url: "https://8.8.8.8/hook" }),
      spec({ url: "https://100.63.255.255/hook" }),
      spec({ url: "https://172.15.255.255/hook" }),
      spec({ url: "https://172.32.0.1/hook" }),
      spec({ url: "https://[2001:4860:4860::8888]/hook" }),
      spec({ url: "https://[::ffff:8.8.8.8]/hook" }),
      spec({ url: "https://hooks.example.com:8443/path?query=1" }),
      spec({ url: "https://xn--bcher-kva.example.com./hook#frag" }),
      spec({ url: "https://[2001:4860::8.8.8.8]:65535" })
    ]
    for (const edge of edges) {
      assert.strictEqual(
        admitSpec(webhookEndpoint, edge)._tag,
        "Admitted",
        JSON.stringify(admitSpec(webhookEndpoint, edge))
      )
    }
  })

  it("says why a url is refused: the public-address rule first, then the grammar", () => {
    const messages = (url: string) => {
      const admission = admitSpec(webhookEndpoint, spec({ url }))
      return admission._tag === "Refused" ? admission.causes.map((cause) => cause.message) : []
    }
    assert.deepStrictEqual(messages("https://localhost:8443/hook"), [
      `Invalid value: "https://localhost:8443/hook": must be a public address, not localhost or a local name (a receiver on loopback is taken only by a development server: nodus serve --webhook-allow-loopback)`
    ])
    assert.deepStrictEqual(messages("https://hooks.example.com/nodus "), [
      `Invalid value: "https://hooks.example.com/nodus ": must be an https URL of a DNS name with a dot, an IPv4 or a bracketed IPv6 address, an optional port, and a path without spaces`
    ])
  })
})

describe("WebhookEndpoint receivers in development", () => {
  const development = { developmentWebhooks: true }
  const receivers = [
    "http://localhost:3000/hooks",
    "https://localhost:8443/hook",
    "http://127.0.0.1:9000/",
    "http://[::1]:3000/x",
    "http://app.localhost/hook"
  ]

  it("a server started with --webhook-allow-loopback takes http and https receivers on loopback", () => {
    for (const url of receivers) {
      assert.strictEqual(admitSpec(webhookEndpoint, spec({ url }), development)._tag, "Admitted", url)
    }
  })

  it("any other server refuses them, and a development server still refuses every other address that is not public", () => {
    for (const url of receivers) {
      assert.deepStrictEqual(refusedFields(admitSpec(webhookEndpoint, spec({ url }))), ["spec.url"], url)
    }
    for (
      const url of [
        "http://hooks.example.com/x",
        "https://10.1.2.3/",
        "https://169.254.169.254/",
        "https://[::127.0.0.1]/",
        "http://user@localhost/"
      ]
    ) {
      assert.deepStrictEqual(refusedFields(admitSpec(webhookEndpoint, spec({ url }), development)), ["spec.url"], url)
    }
  })
})

describe("WebhookEndpoint updates", () => {
  const created = spec({ eventTypes: ["job.*"], projects: ["ml"], description: "alerts" })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  // Spec: WebhookEndpoint — "Every field can change after create".
  const mutable: ReadonlyArray<readonly [string, JsonObject]> = [
    ["url", { url: "https://other.example.com/hook" }],
    ["eventTypes", { eventTypes: ["billing.*", "job.failed"] }],
    ["projects", { projects: [] }],
    ["enabled", { enabled: false }],
    ["description", { description: "paging" }]
  ]

  for (const [field, fields] of mutable) {
    it(`accepts a change of ${field}`, () => {
      assert.deepStrictEqual(updateRefusals(webhookEndpoint, created, changed(fields)), { immutable: [], invalid: [] })
    })
  }
})

describe("WebhookEndpoint rotation body", () => {
  const rotation = { spec: WebhookEndpointRotation, status: WebhookEndpointRotation }

  it("defaults previousSecretTTL to 24h", () => {
    const admission = admitSpec(rotation, {})
    assert.deepStrictEqual(admission._tag === "Admitted" ? admission.spec : admission, { previousSecretTTL: "24h" })
  })

  it("admits 0s and 7 days, refuses more than 7 days and a non-duration", () => {
    assert.strictEqual(admitSpec(rotation, { previousSecretTTL: "0s" })._tag, "Admitted")
    assert.strictEqual(admitSpec(rotation, { previousSecretTTL: "168h" })._tag, "Admitted")
    assert.include(refusedFields(admitSpec(rotation, { previousSecretTTL: "169h" })), "spec.previousSecretTTL")
    assert.include(refusedFields(admitSpec(rotation, { previousSecretTTL: "a week" })), "spec.previousSecretTTL")
  })
})

describe("WebhookEndpoint status", () => {
  const envelope = Schema.Struct({ status: webhookEndpoint.status }) as unknown as Schema.Codec<unknown, unknown>
  const statusRefusals = (status: Json): ReadonlyArray<string> => {
    const result = admit(envelope, { status }, "Strict", { kind: "webhookendpoints" }, "WebhookEndpoint")
    return Result.isFailure(result) ? (result.failure.causes ?? []).map((cause) => cause.field) : []
  }

  it("admits what the service writes", () => {
    assert.deepStrictEqual(
      statusRefusals({
        signingSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        lastDelivery: {
          id: "msg_1",
          type: "job.failed",
          time: "2026-01-02T15:04:05Z",
          phase: "Failed",
          attempts: 3,
          responseCode: 500,
          durationMs: 120
        },
        deliveries24h: { succeeded: 10, failed: 3 },
        failingSince: "2026-01-02T15:04:05Z",
        secretRotation: "2026-01-03T15:04:05Z",
        conditions: [{
          type: "Healthy",
          status: "False",
          lastTransitionTime: "2026-01-02T15:04:05Z",
          reason: "DeliveriesFailing",
          message: "The last 3 deliveries failed."
        }],
        observedGeneration: 2
      }),
      []
    )
  })

  it("refuses a signing secret without the whsec_ prefix, an unknown delivery phase and a negative count", () => {
    assert.include(statusRefusals({ signingSecret: "MfKQ9r8GKYqrTwjU" }), "status.signingSecret")
    assert.include(statusRefusals({ lastDelivery: { phase: "Retrying" } }), "status.lastDelivery.phase")
    assert.include(statusRefusals({ deliveries24h: { succeeded: -1, failed: 0 } }), "status.deliveries24h.succeeded")
  })
})
