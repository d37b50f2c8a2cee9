// Tests for the discovery documents: every registry kind is advertised once with its scope and verbs, status
// subresources follow the operations, and the aggregated form and Accept negotiation match what kubectl v1.32 and
// python-kubernetes need (kubectl-compat §2).

import { assert, describe, it } from "@effect/vitest"
import type { Json, JsonObject } from "../../src/core/Json.ts"
import { isArray, isObject } from "../../src/core/Json.ts"
import * as Discovery from "../../src/http/Discovery.ts"
import { kinds } from "../../src/kinds/Kinds.ts"

const group = "nodus.dev"
/** kubectl v1.32's Accept header on /api and /apis (kubectl-compat §2). */
const kubectlDiscoveryAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
  "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"

const objects = (value: Json | undefined): ReadonlyArray<JsonObject> => {
  assert.isTrue(isArray(value), "expected an array")
  return (value as ReadonlyArray<Json>).filter(isObject)
}

const legacyResources = (): ReadonlyArray<
  JsonObject
> => [
  ...objects(Discovery.resourceList(group, "v1")["resources"]),
  ...objects(Discovery.resourceList(group, "v1beta1")["resources"])
]

const legacyEntry = (name: string): JsonObject | undefined => legacyResources().find((entry) => entry["name"] === name)

const aggregatedVersions = (): ReadonlyArray<JsonObject> => {
  const [item] = objects(Discovery.aggregatedGroups(group)["items"])
  assert.isDefined(item)
  return objects(item?.["versions"])
}

const aggregatedEntry = (plural: string): JsonObject | undefined =>
  aggregatedVersions().flatMap((version) => objects(version["resources"])).find((entry) => entry["resource"] === plural)

describe("Discovery legacy resource lists", () => {
  it("lists every kind exactly once across v1 and v1beta1", () => {
    const names = legacyResources().map((entry) => entry["name"]).filter((name) =>
      typeof name === "string" && !name.includes("/")
    )
    assert.strictEqual(names.length, kinds.length)
    assert.deepStrictEqual([...names].sort(), kinds.map((info) => info.plural).sort())
  })

  it("gives each kind its version's group version, scope, kind, singular name, short names and category", () => {
    for (const info of kinds) {
      const list = Discovery.resourceList(group, info.version)
      assert.strictEqual(list["groupVersion"], `${group}/${info.version}`)
      const entry = objects(list["resources"]).find((resource) => resource["name"] === info.plural)
      assert.isDefined(entry, info.plural)
      assert.strictEqual(entry?.["namespaced"], info.scope === "Namespaced", info.plural)
      assert.strictEqual(entry?.["kind"], info.kind)
      assert.strictEqual(entry?.["singularName"], info.singular)
      assert.deepStrictEqual(entry?.["categories"], ["nodus"])
      if (info.shortNames.length > 0) assert.deepStrictEqual(entry?.["shortNames"], info.shortNames)
    }
  })

  const rows: ReadonlyArray<
    readonly [
      plural: string,
      namespaced: boolean,
      verbs: ReadonlyArray<string>,
      status: ReadonlyArray<string> | undefined
    ]
  > = [
    ["jobs", true, ["create", "delete", "get", "list", "patch", "update", "watch"], ["get", "patch", "update"]],
    ["attempts", true, ["get", "list", "watch"], undefined],
    ["enrollmenttokens", true, ["create", "delete", "get", "list", "watch"], undefined],
    ["budgets", false, ["create", "delete", "get", "list", "patch", "update", "watch"], ["get", "patch", "update"]],
    ["creditgrants", false, ["get", "list", "watch"], undefined],
    ["trainingjobs", true, ["create", "delete", "get", "list", "patch", "update", "watch"], ["get", "patch", "update"]],
    ["nodes", true, ["delete", "get", "list", "patch", "watch"], ["get", "patch", "update"]]
  ]
  for (const [plural, namespaced, verbs, statusVerbs] of rows) {
    it(`${plural}: namespaced ${namespaced}, verbs ${verbs.join(",")}, status ${statusVerbs?.join(",") ?? "absent"}`, () => {
      const entry = legacyEntry(plural)
      assert.strictEqual(entry?.["namespaced"], namespaced)
      assert.deepStrictEqual(entry?.["verbs"], verbs)
      const status = legacyEntry(`${plural}/status`)
      if (statusVerbs === undefined) {
        assert.isUndefined(status)
      } else {
        assert.deepStrictEqual(status?.["verbs"], statusVerbs)
        assert.strictEqual(status?.["namespaced"], namespaced)
        assert.strictEqual(status?.["singularName"], "")
      }
    })
  }

  it("never advertises deletecollection", () => {
    assert.isFalse(
      JSON.stringify([Discovery.resourceList(group, "v1"), Discovery.aggregatedGroups(group)]).includes(
        "deletecollection"
      )
    )
  })

  it("serves trainingjobs in v1beta1 only", () => {
    const inVersion = (version: "v1" | "v1beta1") =>
      objects(Discovery.resourceList(group, version)["resources"]).some((entry) => entry["name"] === "trainingjobs")
    assert.isFalse(inVersion("v1"))
    assert.isTrue(inVersion("v1beta1"))
  })
})

describe("Discovery groups", () => {
  it("lists the group with both versions and v1 preferred, as Python's DynamicClient requires", () => {
    const list = Discovery.groupList(group)
    assert.strictEqual(list["kind"], "APIGroupList")
    const [entry] = objects(list["groups"])
    assert.strictEqual(entry?.["name"], group)
    const preferred = { groupVersion: "nodus.dev/v1", version: "v1" }
    assert.deepStrictEqual(entry?.["preferredVersion"], preferred)
    // Python matches the preferred version against the versions list by dict equality.
    assert.deepStrictEqual(entry?.["versions"], [preferred, { groupVersion: "nodus.dev/v1beta1", version: "v1beta1" }])
  })

  it("serves the APIGroup with kind and apiVersion", () => {
    const body = Discovery.group(group)
    assert.strictEqual(body["kind"], "APIGroup")
    assert.strictEqual(body["apiVersion"], "v1")
    assert.deepStrictEqual(body["preferredVersion"], { groupVersion: "nodus.dev/v1", version: "v1" })
  })

  it("reports Kubernetes 1.32 on /version", () => {
    const version = Discovery.versionInfo()
    assert.strictEqual(version["major"], "1")
    assert.strictEqual(version["minor"], "32")
    assert.strictEqual(version["gitVersion"], "v1.32.0-nodus")
    assert.strictEqual(version["platform"], "linux/amd64")
  })
})

describe("Discovery core group", () => {
  it("serves namespaces and read-only events in /api/v1 without the nodus category", () => {
    assert.deepStrictEqual(Discovery.coreVersions()["versions"], ["v1"])
    const list = Discovery.coreResourceList()
    assert.strictEqual(list["groupVersion"], "v1")
    assert.deepStrictEqual(list["resources"], [{
      name: "namespaces",
      singularName: "namespace",
      namespaced: false,
      kind: "Namespace",
      verbs: ["create", "delete", "get", "list", "watch"],
      shortNames: ["ns"]
    }, {
      name: "events",
      singularName: "event",
      namespaced: true,
      kind: "Event",
      verbs: ["get", "list", "watch"],
      shortNames: ["ev"]
    }])
  })

  it("is not empty in aggregated form, since kubectl would rediscover on every call", () => {
    const body = Discovery.aggregatedCore()
    assert.strictEqual(body["kind"], "APIGroupDiscoveryList")
    const [item] = objects(body["items"])
    const [version] = objects(item?.["versions"])
    assert.strictEqual(version?.["version"], "v1")
    const [namespaces] = objects(version?.["resources"])
    assert.strictEqual(namespaces?.["resource"], "namespaces")
    assert.strictEqual(namespaces?.["scope"], "Cluster")
    assert.deepStrictEqual(namespaces?.["responseKind"], { group: "", version: "v1", kind: "Namespace" })
    assert.isUndefined(namespaces?.["categories"])
    const [, events] = objects(version?.["resources"])
    assert.strictEqual(events?.["resource"], "events")
    assert.strictEqual(events?.["scope"], "Namespaced")
    assert.deepStrictEqual(events?.["responseKind"], { group: "", version: "v1", kind: "Event" })
  })
})

describe("Discovery aggregated form", () => {
  it("lists v1 first, then v1beta1", () => {
    assert.deepStrictEqual(aggregatedVersions().map((version) => version["version"]), ["v1", "v1beta1"])
    const body = Discovery.aggregatedGroups(group)
    assert.strictEqual(body["apiVersion"], "apidiscovery.k8s.io/v2")
    assert.deepStrictEqual(body["metadata"], {})
  })

  it("describes jobs with scope, response kind and a status subresource", () => {
    const jobs = aggregatedEntry("jobs")
    const responseKind = { group, version: "v1", kind: "Job" }
    assert.strictEqual(jobs?.["scope"], "Namespaced")
    assert.strictEqual(jobs?.["singularResource"], "job")
    assert.deepStrictEqual(jobs?.["responseKind"], responseKind)
    assert.deepStrictEqual(jobs?.["shortNames"], ["nj"])
    assert.deepStrictEqual(jobs?.["categories"], ["nodus"])
    assert.deepStrictEqual(jobs?.["subresources"], [{
      subresource: "status",
      responseKind,
      verbs: ["get", "patch", "update"]
    }])
  })

  it("gives attempts no subresources and budgets the Cluster scope", () => {
    assert.isUndefined(aggregatedEntry("attempts")?.["subresources"])
    assert.deepStrictEqual(aggregatedEntry("attempts")?.["verbs"], ["get", "list", "watch"])
    assert.strictEqual(aggregatedEntry("budgets")?.["scope"], "Cluster")
  })

  it("lists every kind once, in its own version", () => {
    for (const info of kinds) {
      const matches = aggregatedVersions().filter((version) =>
        objects(version["resources"]).some((entry) => entry["resource"] === info.plural)
      )
      assert.deepStrictEqual(matches.map((version) => version["version"]), [info.version], info.plural)
    }
  })

  it("has the exact content type kubectl checks", () => {
    assert.strictEqual(
      Discovery.aggregatedContentType,
      "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
  })
})

describe("Discovery.wantsAggregated", () => {
  const rows: ReadonlyArray<readonly [accept: string | undefined, expected: boolean]> = [
    [kubectlDiscoveryAccept, true],
    ["application/json", false],
    [undefined, false],
    ["", false],
    ["application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", false],
    ["application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io", true],
    ["application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0,application/json", false],
    ["application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", false]
  ]
  for (const [accept, expected] of rows) {
    it(`${JSON.stringify(accept)} → ${expected}`, () => {
      assert.strictEqual(Discovery.wantsAggregated(accept), expected)
    })
  }
})
