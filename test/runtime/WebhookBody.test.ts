/**
 * What a webhook delivery carries (spec: Events, Delivery): the object's identity and status as the API shows it,
 * never its spec (secret references, env) nor what names a machine, in a body of at most 64 KiB.
 */
import { describe, expect, it } from "vitest"
import * as Limits from "../../src/core/Limits.ts"
import { deliveredObjectOf, deliveryOf } from "../../src/runtime/EventOutbox.ts"
import { bodyOf } from "../../src/runtime/WebhookLog.ts"

const job = (status: Record<string, unknown>) =>
  ({
    apiVersion: "nodus.dev/v1",
    kind: "Job",
    metadata: {
      name: "train",
      namespace: "research",
      uid: "uid-1",
      resourceVersion: "7",
      generation: 1,
      creationTimestamp: "2026-01-01T00:00:00Z"
    },
    spec: { image: "python:3.12", env: [{ name: "TOKEN", value: "not-for-webhooks" }] },
    status
  }) as any

describe("a delivery's object", () => {
  it("is the identity and the status, never the spec, and no gang rendezvous address", () => {
    const object = deliveredObjectOf(
      job({ phase: "Running", gang: { size: 2, rendezvous: "10.0.3.7:29500", phase: "Running" } })
    )
    expect(object).toEqual({
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: "train", namespace: "research", uid: "uid-1" },
      status: { phase: "Running", gang: { size: 2, phase: "Running" } }
    })
    expect(JSON.stringify(object)).not.toContain("not-for-webhooks")
  })

  it("fits 64 KiB: a larger status keeps its phase, reason and message", () => {
    const huge = job({
      phase: "Failed",
      reason: "BackoffLimitExceeded",
      message: "exit 1",
      completedIndexes: "x".repeat(200_000)
    })
    const body = bodyOf(
      deliveryOf("job.failed", Date.parse("2026-01-01T01:00:00Z"), {
        reason: "BackoffLimitExceeded",
        message: "m".repeat(100_000)
      }, deliveredObjectOf(huge))
    )
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(Limits.webhookBodyBytesMax)
    const parsed = JSON.parse(body)
    expect(parsed.data.object.status).toEqual({ phase: "Failed", reason: "BackoffLimitExceeded", message: "exit 1" })
    expect(parsed.type).toBe("job.failed")
    const small = bodyOf(
      deliveryOf("job.failed", 0, { reason: "R", message: "short" }, deliveredObjectOf(job({ phase: "Failed" })))
    )
    expect(JSON.parse(small).data.object.status).toEqual({ phase: "Failed" })
  })
})
