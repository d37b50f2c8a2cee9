/**
 * The kind registry against the spec's availability table and the docs. Kubernetes facts (unique names, one version
 * per kind) are checked here once, so routing and discovery may rely on them.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { namespaceKind, type Operation } from "../../../src/core/meta/Kinds.ts"
import { byKindName, byResource, kinds, kindsIn } from "../../../src/kinds/Kinds.ts"
import { isDefined } from "../../../src/kinds/Kinds.ts"

const full: ReadonlyArray<Operation> = [
  "list",
  "listAll",
  "watch",
  "get",
  "create",
  "replace",
  "patch",
  "delete",
  "getStatus",
  "writeStatus"
]
const readOnly: ReadonlyArray<Operation> = ["list", "listAll", "watch", "get"]

/** Spec: Availability by kind, row by row (with the scopes the spec leaves open as docs/kinds.md decides them). */
const availability: ReadonlyArray<readonly [string, "Namespaced" | "Cluster", ReadonlyArray<Operation>]> = [
  ...[
    "agentgroups",
    "agentruns",
    "agents",
    "apps",
    "connections",
    "environments",
    "functioncalls",
    "functions",
    "images",
    "inferenceendpoints",
    "jobs"
  ]
    .map((plural) => [plural, "Namespaced", full] as const),
  ...["sandboxes", "workspaces", "sweeps", "pools"].map((plural) => [plural, "Namespaced", full] as const),
  ["attempts", "Namespaced", readOnly],
  ["enrollmenttokens", "Namespaced", [...readOnly, "create", "delete"]],
  ...["budgets", "cloudaccounts", "marketplaceentries", "webhookendpoints"].map((plural) =>
    [plural, "Cluster", [
      "list",
      "listAll",
      "watch",
      "get",
      "create",
      "replace",
      "patch",
      "delete",
      "getStatus",
      "writeStatus"
    ]] as const
  ),
  ["creditgrants", "Cluster", readOnly],
  ["marketplacecontracts", "Cluster", readOnly],
  ["trainingjobs", "Namespaced", full],
  ["trainingruntimes", "Namespaced", full],
  ...["secrets", "serviceaccounts", "volumes", "pipelines"].map((plural) => [plural, "Namespaced", full] as const),
  ["models", "Namespaced", readOnly],
  ["poolactions", "Namespaced", [...readOnly, "patch", "getStatus", "writeStatus"]],
  ["nodes", "Namespaced", [...readOnly, "delete", "patch", "getStatus", "writeStatus"]],
  ["offerings", "Cluster", readOnly],
  ["topups", "Cluster", [...readOnly, "create"]],
  ["reservedhosts", "Namespaced", readOnly]
]

describe("kind registry", () => {
  it("serves every row of the availability table with its scope and operations, and nothing else", () => {
    assert.strictEqual(kinds.length, availability.length)
    for (const [plural, scope, operations] of availability) {
      const info = kinds.find((kind) => kind.plural === plural)
      assert.isDefined(info, plural)
      assert.strictEqual(info!.scope, scope, plural)
      assert.deepStrictEqual([...info!.operations].sort(), [...operations].sort(), plural)
    }
  })

  it("puts TrainingJob and TrainingRuntime in v1beta1 and every other kind in v1 (spec: Versioning)", () => {
    assert.deepStrictEqual(kindsIn("v1beta1").map((info) => info.kind), ["TrainingJob", "TrainingRuntime"])
    assert.strictEqual(kindsIn("v1").length, kinds.length - 2)
    assert.isUndefined(byResource("v1", "trainingjobs"))
    assert.strictEqual(byResource("v1beta1", "trainingjobs")?.kind, "TrainingJob")
  })

  it("has unique kinds, plurals and short names, and maps kinds back to plurals", () => {
    const all = [namespaceKind, ...kinds]
    assert.strictEqual(new Set(all.map((info) => info.kind)).size, all.length)
    assert.strictEqual(new Set(all.map((info) => info.plural)).size, all.length)
    const shortNames = all.flatMap((info) => info.shortNames)
    assert.strictEqual(new Set(shortNames).size, shortNames.length)
    for (const info of all) assert.strictEqual(byKindName(info.kind)?.plural, info.plural)
  })

  it("is what docs/kinds.md lists", () => {
    const doc = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "kinds.md"), "utf8")
    for (const info of [namespaceKind, ...kinds]) {
      const row = doc.split("\n").find((line) => line.startsWith(`| ${info.kind} | \`${info.plural}\``))
      assert.isDefined(row, `docs/kinds.md lacks ${info.kind}`)
      assert.include(row!, info.scope === "Namespaced" ? "| project |" : "| cluster |", info.kind)
      assert.include(row!, `| ${[...info.operations].join(", ")} |`, info.kind)
    }
  })

  it("gives every kind its own schema and a page of fields linked from docs/kinds.md", () => {
    const docs = join(import.meta.dirname, "..", "..", "..", "docs")
    const index = readFileSync(join(docs, "kinds.md"), "utf8")
    for (const info of kinds) {
      assert.isTrue(isDefined(info.kind), `${info.kind} has no schema in src/kinds/Definitions.ts`)
      assert.include(index, `[${info.kind}](kinds/${info.kind}.md)`, `docs/kinds.md does not link ${info.kind}`)
      assert.match(
        readFileSync(join(docs, "kinds", `${info.kind}.md`), "utf8"),
        new RegExp(`^## ${info.kind}\n`, "u"),
        info.kind
      )
    }
  })
})
