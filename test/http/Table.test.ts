// Tests for server-side printing: HumanDuration against Kubernetes' own outputs on every branch, dollar cells, the
// Job and Namespace columns, and the row objects kubectl needs for -A, --show-labels and --sort-by
// (kubectl-compat §5).

import { assert, describe, it } from "@effect/vitest"
import type { Json, JsonObject } from "../../src/core/Json.ts"
import { isArray, isObject } from "../../src/core/Json.ts"
import type { KindInfo } from "../../src/core/meta/Kinds.ts"
import type { ResourceObject } from "../../src/core/meta/ObjectMeta.ts"
import * as Table from "../../src/http/Table.ts"
import { byResource } from "../../src/kinds/Kinds.ts"

const secondMs = 1000
const minuteMs = 60 * secondMs
const hourMs = 60 * minuteMs
const dayMs = 24 * hourMs
const yearMs = 365 * dayMs

/** kubectl v1.32's Accept header for `kubectl get` (kubectl-compat §5). */
const kubectlTableAccept =
  "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

const kind = (plural: string): KindInfo => {
  const info = byResource("v1", plural)
  if (info === undefined) throw new Error(`no kind ${plural}`)
  return info
}

const now = Date.parse("2025-03-01T12:00:00Z")

/** A Job as the store serves it, created an hour before `now`. */
const makeJob = (name: string, status: Json): ResourceObject => ({
  apiVersion: "nodus.dev/v1",
  kind: "Job",
  metadata: {
    name,
    namespace: "demo",
    uid: `uid-${name}`,
    resourceVersion: "42",
    generation: 1,
    creationTimestamp: "2025-03-01T11:00:00Z",
    labels: { team: "a" }
  },
  spec: { image: "python:3.12" },
  status
})

const seedJob = makeJob("seed-job", {
  phase: "Succeeded",
  succeeded: 4,
  completedIndexes: "0-3",
  cost: { totalUSD: "0.420000" },
  placement: { offering: "h100-80gb" }
})

const rowsOf = (table: JsonObject): ReadonlyArray<JsonObject> => {
  const rows = table["rows"]
  assert.isTrue(isArray(rows))
  return (rows as ReadonlyArray<Json>).filter(isObject)
}

describe("Table.humanDuration", () => {
  // Expected values are the outputs of k8s.io/apimachinery/pkg/util/duration.HumanDuration.
  const rows: ReadonlyArray<readonly [milliseconds: number, expected: string]> = [
    [-3 * secondMs, "<invalid>"],
    [-2 * secondMs, "<invalid>"],
    [-1999, "0s"],
    [-1 * secondMs, "0s"],
    [-1, "0s"],
    [0, "0s"],
    [999, "0s"],
    [1 * secondMs, "1s"],
    [59 * secondMs, "59s"],
    [119 * secondMs, "119s"],
    [119_999, "119s"],
    [120 * secondMs, "2m"],
    [2 * minuteMs + 1 * secondMs, "2m1s"],
    [9 * minuteMs + 59 * secondMs, "9m59s"],
    [10 * minuteMs, "10m"],
    [10 * minuteMs + 59 * secondMs, "10m"],
    [60 * minuteMs, "60m"],
    [179 * minuteMs + 59 * secondMs, "179m"],
    [3 * hourMs, "3h"],
    [3 * hourMs + 1 * minuteMs, "3h1m"],
    [7 * hourMs + 59 * minuteMs, "7h59m"],
    [8 * hourMs, "8h"],
    [8 * hourMs + 59 * minuteMs, "8h"],
    [47 * hourMs + 59 * minuteMs, "47h"],
    [48 * hourMs, "2d"],
    [49 * hourMs, "2d1h"],
    [7 * dayMs + 23 * hourMs, "7d23h"],
    [8 * dayMs, "8d"],
    [8 * dayMs + 23 * hourMs, "8d"],
    [729 * dayMs, "729d"],
    [730 * dayMs, "2y"],
    [731 * dayMs, "2y1d"],
    [3 * yearMs + 364 * dayMs, "3y364d"],
    [8 * yearMs - 1 * dayMs, "7y364d"],
    [8 * yearMs, "8y"],
    [8 * yearMs + 300 * dayMs, "8y"],
    [20 * yearMs, "20y"]
  ]
  for (const [milliseconds, expected] of rows) {
    it(`${milliseconds} ms → ${expected}`, () => {
      assert.strictEqual(Table.humanDuration(milliseconds), expected)
    })
  }
})

describe("Table.formatUsd", () => {
  const rows: ReadonlyArray<readonly [value: Json | undefined, expected: string]> = [
    ["0.420000", "$0.42"],
    ["12", "$12.00"],
    ["0.0001", "$0.0001"],
    ["0", "$0.00"],
    ["0.000000", "$0.00"],
    ["1234.5", "$1234.50"],
    ["0.123456", "$0.123456"],
    ["-3.100", "-$3.10"],
    ["007.10", "$7.10"],
    [0.42, "$0.42"],
    [12, "$12.00"],
    [1e-7, "$0.0000001"],
    [undefined, ""],
    [null, ""],
    [{ amount: "1" }, ""],
    ["n/a", "n/a"]
  ]
  for (const [value, expected] of rows) {
    it(`${JSON.stringify(value)} → ${JSON.stringify(expected)}`, () => {
      assert.strictEqual(Table.formatUsd(value), expected)
    })
  }
})

describe("Table.wantsTable", () => {
  const rows: ReadonlyArray<readonly [accept: string | undefined, expected: boolean]> = [
    [kubectlTableAccept, true],
    ["application/json;as=Table;v=v1beta1;g=meta.k8s.io", true],
    ["application/json", false],
    [undefined, false],
    ["application/json;as=Table;v=v1;g=example.com", false],
    ["application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", false]
  ]
  for (const [accept, expected] of rows) {
    it(`${JSON.stringify(accept)} → ${expected}`, () => {
      assert.strictEqual(Table.wantsTable(accept), expected)
    })
  }
})

describe("Table.includeObjectOf", () => {
  it("defaults to Metadata and rejects unknown values", () => {
    assert.strictEqual(Table.includeObjectOf(undefined), "Metadata")
    assert.strictEqual(Table.includeObjectOf(null), "Metadata")
    assert.strictEqual(Table.includeObjectOf("Object"), "Object")
    assert.strictEqual(Table.includeObjectOf("None"), "None")
    assert.isUndefined(Table.includeObjectOf("Everything"))
  })
})

describe("Table.columnDefinitions", () => {
  it("gives jobs Name, Phase, Age, Cost, Completions, then Image and Offering for -o wide", () => {
    const columns = Table.columnDefinitions(kind("jobs"))
    assert.deepStrictEqual(columns.map((column) => [column["name"], column["priority"]]), [
      ["Name", 0],
      ["Phase", 0],
      ["Age", 0],
      ["Cost", 0],
      ["Succeeded", 0],
      ["Indexes", 1],
      ["Image", 1],
      ["Offering", 1]
    ])
    assert.strictEqual(columns[0]?.["format"], "name")
    assert.strictEqual(columns[2]?.["type"], "date")
  })

  it("leaves Cost out for kinds that do not spend money", () => {
    assert.deepStrictEqual(Table.columnDefinitions(kind("agents")).map((column) => column["name"]), [
      "Name",
      "Phase",
      "Age"
    ])
  })

  it("shows the kinds without a phase by their state, not an empty Phase: Offering Available, WebhookEndpoint Healthy, Budget Exceeded", () => {
    const second = (plural: string) => Table.columnDefinitions(kind(plural)).map((column) => column["name"])[1]
    assert.deepStrictEqual([second("offerings"), second("webhookendpoints"), second("budgets")], [
      "Available",
      "Healthy",
      "Exceeded"
    ])
    const object = (kindName: string, status: Json): ResourceObject => ({
      apiVersion: "nodus.dev/v1",
      kind: kindName,
      metadata: { name: "x", uid: "u", resourceVersion: "1", generation: 1, creationTimestamp: "2025-03-01T11:00:00Z" },
      spec: {},
      status
    })
    const cell = (plural: string, kindName: string, status: Json) =>
      rowsOf(
        Table.table(kind(plural), [object(kindName, status)], { now, includeObject: "None", withColumns: true })
      )[0]?.["cells"]
    assert.strictEqual((cell("offerings", "Offering", { available: true }) as Array<Json>)[1], "true")
    const failing = {
      conditions: [{ type: "Ready", status: "True" }, { type: "Healthy", status: "False", reason: "DeliveriesFailing" }]
    }
    assert.strictEqual((cell("webhookendpoints", "WebhookEndpoint", failing) as Array<Json>)[1], "False")
    assert.strictEqual(
      (cell("budgets", "Budget", { conditions: [{ type: "Exceeded", status: "True" }] }) as Array<Json>)[1],
      "True"
    )
    assert.strictEqual((cell("budgets", "Budget", {}) as Array<Json>)[1], "")
  })

  it("gives namespaces Name, Status and Age", () => {
    assert.deepStrictEqual(Table.columnDefinitions("namespaces").map((column) => column["name"]), [
      "Name",
      "Status",
      "Age"
    ])
  })
})

describe("Table.table", () => {
  it("renders a Job row with formatted age and cost and a PartialObjectMetadata object", () => {
    const table = Table.table(kind("jobs"), [seedJob], {
      now,
      includeObject: "Metadata",
      resourceVersion: "105",
      withColumns: true
    })
    assert.strictEqual(table["kind"], "Table")
    assert.strictEqual(table["apiVersion"], "meta.k8s.io/v1")
    assert.deepStrictEqual(table["metadata"], { resourceVersion: "105" })
    const [row] = rowsOf(table)
    assert.deepStrictEqual(row?.["cells"], [
      "seed-job",
      "Succeeded",
      "60m",
      "$0.42",
      "4",
      "0-3",
      "python:3.12",
      "h100-80gb"
    ])
    assert.deepStrictEqual(row?.["object"], {
      kind: "PartialObjectMetadata",
      apiVersion: "meta.k8s.io/v1",
      metadata: seedJob.metadata
    })
    const metadata = isObject(row?.["object"]) ? row["object"]["metadata"] : undefined
    assert.isTrue(isObject(metadata) && metadata["namespace"] === "demo")
    assert.deepStrictEqual(isObject(metadata) ? metadata["labels"] : undefined, { team: "a" })
  })

  it("leaves cells empty when the status lacks the fields", () => {
    const pending = makeJob("new-job", null)
    const [row] = rowsOf(Table.table(kind("jobs"), [pending], { now, includeObject: "Metadata", withColumns: true }))
    assert.deepStrictEqual(row?.["cells"], ["new-job", "", "60m", "", "", "", "python:3.12", ""])
  })

  it("puts the whole object in the row for includeObject=Object and nothing for None", () => {
    const [full] = rowsOf(Table.table(kind("jobs"), [seedJob], { now, includeObject: "Object", withColumns: true }))
    assert.deepStrictEqual(full?.["object"], seedJob)
    const [bare] = rowsOf(Table.table(kind("jobs"), [seedJob], { now, includeObject: "None", withColumns: true }))
    assert.isFalse(bare !== undefined && "object" in bare)
  })

  it("omits the column definitions for later watch events and carries list metadata", () => {
    const table = Table.table(kind("jobs"), [seedJob], {
      now,
      includeObject: "Metadata",
      resourceVersion: "7",
      continue: "token",
      remainingItemCount: 3,
      withColumns: false
    })
    assert.isFalse("columnDefinitions" in table)
    assert.deepStrictEqual(table["metadata"], { resourceVersion: "7", continue: "token", remainingItemCount: 3 })
    assert.strictEqual(rowsOf(table).length, 1)
    const withColumns = Table.table(kind("jobs"), [], { now, includeObject: "Metadata", withColumns: true })
    assert.strictEqual((withColumns["columnDefinitions"] as ReadonlyArray<Json>).length, 8)
    assert.deepStrictEqual(withColumns["rows"], [])
  })

  it("prints namespaces as Active when they carry no phase", () => {
    const namespace: ResourceObject = {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: "demo",
        uid: "ns-demo",
        resourceVersion: "1",
        generation: 1,
        creationTimestamp: "2025-02-27T12:00:00Z"
      }
    }
    const [row] = rowsOf(Table.table("namespaces", [namespace], { now, includeObject: "Metadata", withColumns: true }))
    assert.deepStrictEqual(row?.["cells"], ["demo", "Active", "2d"])
  })
})
