/**
 * The FunctionCall's admission rules (spec: FunctionCall, Payload, Limits), one row per rule: the spec as written, and
 * either the field path admission refuses or what the admitted spec holds. Then its update rules: only `state` may
 * change after create. Its status schema is checked too, since controllers write the spec's value sets into it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { Json, JsonObject } from "../../../src/core/Json.ts"
import { functionCall } from "../../../src/kinds/function/FunctionCallSchema.ts"
import { admitSpec, refusedFields, updateRefusals } from "../../support/KindRules.ts"

const base = { function: "embed", input: { encoding: "Pickle", inline: "gASVAAAAAAAAAAB9lC4=" } }
const spec = (fields: JsonObject): JsonObject => ({ ...base, ...fields })
const blob = `sha256:${"b".repeat(64)}`
/** base64 text of `bytes` zero bytes. */
const inlineOf = (bytes: number): string => Buffer.alloc(bytes).toString("base64")

/** Rows whose spec is refused, with the field the first cause names. */
const refused: ReadonlyArray<readonly [string, JsonObject, string]> = [
  ["no function", { input: base.input }, "spec.function"],
  ["an empty function", spec({ function: "" }), "spec.function"],
  ["a function name that is no object name", spec({ function: "Embed_Fn" }), "spec.function"],
  ["input with inline and blob", spec({ input: { inline: "AA==", blob } }), "spec.input"],
  ["input with neither inline nor blob", spec({ input: { encoding: "JSON" } }), "spec.input"],
  ["inline input above 64 KiB", spec({ input: { inline: inlineOf(64 * 1024 + 1) } }), "spec.input.inline"],
  ["inline input that is not base64", spec({ input: { inline: "not base64!" } }), "spec.input.inline"],
  ["an input blob that is not a content address", spec({ input: { blob: "abc" } }), "spec.input.blob"],
  ["an unknown encoding", spec({ input: { inline: "AA==", encoding: "Msgpack" } }), "spec.input.encoding"],
  ["an input sha256 that is not hex", spec({ input: { blob, sha256: "xyz" } }), "spec.input.sha256"],
  ["mapIndex without mapId", spec({ mapIndex: 3 }), "spec.mapIndex"],
  ["mapId without mapIndex", spec({ mapId: "map-1" }), "spec.mapIndex"],
  ["a negative mapIndex", spec({ mapId: "map-1", mapIndex: -1 }), "spec.mapIndex"],
  ["a fractional mapIndex", spec({ mapId: "map-1", mapIndex: 1.5 }), "spec.mapIndex"],
  ["a mapId that is no label value", spec({ mapId: "map 1", mapIndex: 0 }), "spec.mapId"],
  ["a mapId longer than 63", spec({ mapId: "m".repeat(64), mapIndex: 0 }), "spec.mapId"],
  ["an empty mapId", spec({ mapId: "", mapIndex: 0 }), "spec.mapId"],
  ["an empty session", spec({ session: "" }), "spec.session"],
  ["an unknown state", spec({ state: "Stopped" }), "spec.state"],
  ["the cancel state spelled the other way", spec({ state: "Canceled" }), "spec.state"],
  ["timeout below 1s", spec({ timeout: "999ms" }), "spec.timeout"],
  ["timeout above 24h", spec({ timeout: "25h" }), "spec.timeout"],
  ["a timeout that is not a duration", spec({ timeout: "forever" }), "spec.timeout"],
  ["an unknown field", spec({ method: "run" }), "spec.method"],
  ["an unknown input field", spec({ input: { inline: "AA==", compression: "zstd" } }), "spec.input.compression"]
]

describe("FunctionCall admission", () => {
  for (const [rule, input, field] of refused) {
    it(`refuses ${rule} at ${field}`, () => {
      const admission = admitSpec(functionCall, input)
      assert.strictEqual(admission._tag, "Refused", rule)
      assert.include(refusedFields(admission), field, `${rule}: ${JSON.stringify(admission)}`)
    })
  }

  it("applies the defaults the spec states; the timeout default (the Function's) is the server's", () => {
    const admission = admitSpec(functionCall, base)
    assert.strictEqual(admission._tag, "Admitted")
    if (admission._tag === "Admitted") assert.deepStrictEqual(admission.spec, { ...base, state: "Running" })
  })

  it("admits every bound at its edge", () => {
    const edges: ReadonlyArray<JsonObject> = [
      spec({ input: { inline: inlineOf(64 * 1024) }, timeout: "1s" }),
      spec({ input: { inline: "" }, timeout: "24h" }),
      spec({
        input: { blob, encoding: "JSON", sha256: "c".repeat(64) },
        mapId: "m".repeat(63),
        mapIndex: 0,
        session: "s-1"
      }),
      spec({ mapId: "01HZX.map_a-b", mapIndex: 999_999, state: "Cancelled" }),
      { function: "team.embed-v2" }
    ]
    for (const edge of edges) {
      assert.strictEqual(admitSpec(functionCall, edge)._tag, "Admitted", JSON.stringify(admitSpec(functionCall, edge)))
    }
  })
})

describe("FunctionCall updates", () => {
  const created = spec({ mapId: "map-1", mapIndex: 4, session: "s-1", timeout: "10m" })
  const changed = (fields: JsonObject): Json => ({ ...created, ...fields })

  it("accepts a change of state (the cancel)", () => {
    assert.deepStrictEqual(updateRefusals(functionCall, created, changed({ state: "Cancelled" })), {
      immutable: [],
      invalid: []
    })
  })

  it("refuses undoing a cancel at spec.state", () => {
    assert.deepStrictEqual(
      updateRefusals(functionCall, changed({ state: "Cancelled" }), changed({ state: "Running" })).invalid,
      ["spec.state"]
    )
  })

  /** Everything in spec but state is immutable (spec: FunctionCall). */
  const immutable: ReadonlyArray<readonly [string, JsonObject, string]> = [
    ["function", { function: "other" }, "spec.function"],
    ["input", { input: { blob } }, "spec.input.blob"],
    ["mapId", { mapId: "map-2" }, "spec.mapId"],
    ["mapIndex", { mapIndex: 5 }, "spec.mapIndex"],
    ["session", { session: "s-2" }, "spec.session"],
    ["timeout", { timeout: "20m" }, "spec.timeout"]
  ]

  for (const [field, fields, path] of immutable) {
    it(`refuses a change of ${field} as immutable at ${path}`, () => {
      assert.include(updateRefusals(functionCall, created, changed(fields)).immutable, path)
    })
  }
})

describe("FunctionCall status", () => {
  const decode = Schema.decodeUnknownExit(functionCall.status, { errors: "all", onExcessProperty: "error" })

  it("holds every status field the spec lists", () => {
    const status = {
      completionTime: "2026-01-02T15:04:05Z",
      conditions: [{
        type: "Funded",
        status: "True",
        lastTransitionTime: "2026-01-02T15:00:00Z",
        reason: "Funded",
        message: "Held."
      }],
      costUSD: "0.000420",
      error: { type: "builtins.ValueError", message: "bad input", traceback: "Traceback (most recent call last): ..." },
      estimate: { rateUSDPerHour: "1.20" },
      message: "raised ValueError",
      phase: "Failed",
      reason: "RemoteError",
      recoveries: 1,
      result: { encoding: "Pickle", blob, sha256: "d".repeat(64) },
      retries: 2,
      startTime: "2026-01-02T15:04:00Z",
      worker: { attempt: "embed-7f3k", epoch: 3 }
    }
    assert.isTrue(decode(status)._tag === "Success")
  })

  const refusedStatus: ReadonlyArray<readonly [string, JsonObject]> = [
    ["an unknown phase", { phase: "Canceled" }],
    ["an unknown reason", { reason: "Timeout" }],
    ["a costUSD that is not a decimal", { costUSD: "free" }],
    ["a result with inline and blob", { result: { inline: "AA==", blob } }],
    ["a negative retries count", { retries: -1 }]
  ]

  for (const [rule, status] of refusedStatus) {
    it(`refuses ${rule}`, () => {
      assert.isTrue(decode(status)._tag === "Failure", rule)
    })
  }

  it("takes each phase and reason the spec names, with the cancel pair", () => {
    for (const phase of ["Queued", "Running", "Recovering", "Succeeded", "Failed", "Cancelling", "Cancelled"]) {
      assert.isTrue(decode({ phase })._tag === "Success", phase)
    }
    for (const reason of ["RemoteError", "DeadlineExceeded", "RecoveryLimitExceeded", "FunctionDeleted", "Cancelled"]) {
      assert.isTrue(decode({ reason })._tag === "Success", reason)
    }
  })
})
