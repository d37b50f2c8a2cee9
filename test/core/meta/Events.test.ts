// Events as core/v1 Event objects (src/core/meta/Events.ts): Kubernetes' naming, times and field selectors.
import { assert, describe, it } from "@effect/vitest"
import {
  aggregationKey,
  eventFieldLabels,
  eventFields,
  eventName,
  eventObject,
  type EventRecord,
  microTime
} from "../../../src/core/meta/Events.ts"
import { checkDns1123Subdomain } from "../../../src/core/meta/Names.ts"

const involved = { apiVersion: "nodus.dev/v1", kind: "Job", name: "train", namespace: "demo", uid: "u-1" }
const at = Date.UTC(2026, 0, 2, 3, 4, 5, 678)
const record: EventRecord = {
  name: "train.abc",
  involved,
  reason: "Preempted",
  message: "lost",
  warning: true,
  count: 2,
  first: at,
  last: at + 60_000,
  component: "nodus-sim"
}

describe("Events", () => {
  it("names events <object>.<hex> as Kubernetes does, distinct within a millisecond, always a DNS subdomain", () => {
    assert.strictEqual(eventName("train", at, 0), `train.${(BigInt(at) * 1_000_000n).toString(16)}`)
    assert.notStrictEqual(eventName("train", at, 1), eventName("train", at, 0))
    const long = eventName("a".repeat(253), at, 7)
    assert.isAtMost(long.length, 253)
    assert.deepStrictEqual(checkDns1123Subdomain(long), [])
  })

  it("writes eventTime in microseconds and the other times at second precision", () => {
    assert.strictEqual(microTime(at), "2026-01-02T03:04:05.678000Z")
    const object = eventObject(record, "uid-9", at)
    assert.strictEqual(object["firstTimestamp"], "2026-01-02T03:04:05Z")
    assert.strictEqual(object["lastTimestamp"], "2026-01-02T03:05:05Z")
    assert.strictEqual(object["eventTime"], "2026-01-02T03:04:05.678000Z")
    assert.strictEqual(object["type"], "Warning")
    assert.strictEqual(object["count"], 2)
    assert.deepStrictEqual(object["source"], { component: "nodus-sim" })
    assert.strictEqual(object.metadata.namespace, "demo")
    assert.deepStrictEqual(object.metadata.ownerReferences, [{
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      name: "train",
      uid: "u-1"
    }])
  })

  it("aggregates by object, reason, message and type", () => {
    const key = aggregationKey(involved, "Running", "The Job is Running.", false)
    assert.strictEqual(aggregationKey({ ...involved }, "Running", "The Job is Running.", false), key)
    assert.notStrictEqual(aggregationKey({ ...involved, uid: "u-2" }, "Running", "The Job is Running.", false), key)
    assert.notStrictEqual(aggregationKey(involved, "Running", "The Job is Running.", true), key)
  })

  it("reads the field labels kubectl describe selects on", () => {
    const fields = eventFields(eventObject(record, "uid-9", at) as never)
    assert.deepStrictEqual(
      [
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "involvedObject.uid",
        "reason",
        "type",
        "source"
      ].map((label) => fields[label]),
      ["Job", "train", "demo", "u-1", "Preempted", "Warning", "nodus-sim"]
    )
    for (const label of Object.keys(fields)) assert.isTrue(eventFieldLabels.has(label), label)
  })
})
