// Unit tests for the request-path parser of src/http/Routes.ts: one table row per path the server answers
// (and a few it does not), percent-decoding per segment, malformed escapes, and ignored empty segments.

import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Routes from "../../src/http/Routes.ts"
import { kindItems } from "../../src/kinds/Registry.ts"

type Route = Routes.Route
const { rootPaths } = Routes
/** Paths parsed as the server parses them, with the registered kinds' subresources that have items. */
const parse = (path: string): Route => Routes.parse(path, kindItems)

const notFound: Route = { _tag: "NotFound" }

const resource = (fields: Omit<Extract<Route, { _tag: "Resource" }>, "_tag">): Route => ({
  _tag: "Resource",
  ...fields
})
const job = (
  fields: { readonly namespace?: string; readonly name?: string; readonly subresource?: string } = {}
): Route => resource({ group: "nodus.dev", version: "v1", plural: "jobs", ...fields })

describe("Routes.parse", () => {
  const cases: Record<string, Route> = {
    // Root, version and health
    "/": { _tag: "Root" },
    "": { _tag: "Root" },
    "/version": { _tag: "Version" },
    "/version/x": notFound,
    "/healthz": { _tag: "Health", check: "healthz" },
    "/readyz": { _tag: "Health", check: "readyz" },
    "/livez": { _tag: "Health", check: "livez" },
    "/healthz/etcd": notFound,
    "/unknown": notFound,

    // The core group: discovery and projects (namespaces)
    "/api": { _tag: "CoreVersions" },
    "/api/v1": { _tag: "CoreResources" },
    "/api/v2": notFound,
    "/api/v1/namespaces": resource({ group: "", version: "v1", plural: "namespaces" }),
    "/api/v1/namespaces/demo": resource({ group: "", version: "v1", plural: "namespaces", name: "demo" }),
    // Events: core/v1, in a project or across projects.
    "/api/v1/namespaces/demo/events": resource({ group: "", version: "v1", plural: "events", namespace: "demo" }),
    "/api/v1/namespaces/demo/events/x": resource({
      group: "",
      version: "v1",
      plural: "events",
      namespace: "demo",
      name: "x"
    }),
    "/api/v1/namespaces/demo/events/x/y": notFound,
    "/api/v1/events": resource({ group: "", version: "v1", plural: "events" }),
    "/api/v1/events/x/y": notFound,
    // Read as a subresource of the namespace; Api.ts answers 404 for subresources other than status and those a kind
    // registers.
    "/api/v1/namespaces/demo/finalize": resource({
      group: "",
      version: "v1",
      plural: "namespaces",
      name: "demo",
      subresource: "finalize"
    }),
    "/api/v1/pods": notFound,

    // Named groups: discovery
    "/apis": { _tag: "Groups" },
    "/apis/nodus.dev": { _tag: "Group", group: "nodus.dev" },
    "/apis/nodus.dev/v1": { _tag: "GroupVersion", group: "nodus.dev", version: "v1" },
    "/apis/nodus.dev/v1beta1": { _tag: "GroupVersion", group: "nodus.dev", version: "v1beta1" },

    // The sim backend's test clock
    "/apis/nodus.dev/v1/simulation/clock": { _tag: "SimulationClock", group: "nodus.dev", version: "v1" },
    "/apis/nodus.dev/v1/simulation": resource({ group: "nodus.dev", version: "v1", plural: "simulation" }),

    // Named groups: collections, items, subresources
    "/apis/nodus.dev/v1/jobs": job(),
    "/apis/nodus.dev/v1/namespaces/demo/jobs": job({ namespace: "demo" }),
    "/apis/nodus.dev/v1/namespaces/demo/jobs/x": job({ namespace: "demo", name: "x" }),
    "/apis/nodus.dev/v1/namespaces/demo/jobs/x/status": job({ namespace: "demo", name: "x", subresource: "status" }),
    "/apis/nodus.dev/v1/budgets/b": resource({ group: "nodus.dev", version: "v1", plural: "budgets", name: "b" }),
    "/apis/nodus.dev/v1/budgets/b/status": resource({
      group: "nodus.dev",
      version: "v1",
      plural: "budgets",
      name: "b",
      subresource: "status"
    }),
    "/apis/nodus.dev/v1/namespaces/demo/serviceaccounts/sa/tokens": resource({
      group: "nodus.dev",
      version: "v1",
      plural: "serviceaccounts",
      namespace: "demo",
      name: "sa",
      subresource: "tokens"
    }),
    // A `namespaces` segment with fewer than two more segments names the namespaces kind itself.
    "/apis/nodus.dev/v1/namespaces": resource({ group: "nodus.dev", version: "v1", plural: "namespaces" }),
    "/apis/nodus.dev/v1/namespaces/demo": resource({
      group: "nodus.dev",
      version: "v1",
      plural: "namespaces",
      name: "demo"
    }),
    // A Sandbox's commands, one command, and what is done to it
    "/apis/nodus.dev/v1/namespaces/demo/sandboxes/s/commands/c1/log": resource({
      group: "nodus.dev",
      version: "v1",
      plural: "sandboxes",
      namespace: "demo",
      name: "s",
      subresource: "commands",
      item: "c1",
      action: "log"
    }),
    "/apis/nodus.dev/v1/namespaces/demo/sandboxes/s/commands/c1/log/extra": notFound,
    "/apis/nodus.dev/v1/namespaces/demo/jobs/x/outputs/o/extra": notFound,
    // Too many segments
    "/apis/nodus.dev/v1/namespaces/demo/jobs/x/status/extra": notFound,
    "/apis/nodus.dev/v1/budgets/b/status/extra": notFound,

    // OpenAPI
    "/openapi/v2": { _tag: "OpenApiV2" },
    "/openapi/v2/x": notFound,
    "/openapi/v3": { _tag: "OpenApiIndex" },
    "/openapi/v3/apis/nodus.dev/v1": { _tag: "OpenApiGroupVersion", group: "nodus.dev", version: "v1" },
    "/openapi/v3/apis/nodus.dev": notFound,
    "/openapi/v3/apis/nodus.dev/v1/x": notFound,
    "/openapi/v3/api/v1": { _tag: "OpenApiCore" },
    "/openapi/v3/api/v2": notFound,
    "/openapi/v4": notFound,
    "/openapi": notFound,

    // Error docs
    "/docs/errors": { _tag: "ErrorDocs" },
    "/docs/errors/NotFound": { _tag: "ErrorDocs", code: "NotFound" },
    "/docs/errors/NotFound/x": notFound,
    "/docs": notFound,
    "/docs/other": notFound,

    // Percent-encoding is decoded per segment, so an encoded '/' stays inside its segment
    "/apis/nodus.dev/v1/namespaces/demo/jobs/a%20b": job({ namespace: "demo", name: "a b" }),
    "/apis/nodus.dev/v1/namespaces/de%6Do/jobs/x": job({ namespace: "demo", name: "x" }),
    "/apis/nodus.dev/v1/namespaces/demo/jobs/a%2Fb": job({ namespace: "demo", name: "a/b" }),
    "/docs/errors/Not%46ound": { _tag: "ErrorDocs", code: "NotFound" },
    "/%76ersion": { _tag: "Version" },
    "/apis/nodus.dev/v1/namespaces/demo/jobs/%E0%A4%A": notFound,
    "/%E0%A4%A": notFound,
    "/apis/nodus.dev/v1/jobs/%": notFound,

    // Empty segments (trailing, doubled) are ignored
    "/version/": { _tag: "Version" },
    "/api/v1/": { _tag: "CoreResources" },
    "/apis/nodus.dev/v1/namespaces/demo/jobs/": job({ namespace: "demo" }),
    "/apis/nodus.dev/v1/namespaces/demo/jobs/x/status/": job({ namespace: "demo", name: "x", subresource: "status" }),
    "//apis//nodus.dev/v1/jobs": job()
  }

  for (const [path, route] of Object.entries(cases)) {
    it(`${JSON.stringify(path)} → ${route._tag}`, () => {
      assert.deepStrictEqual(parse(path), route)
    })
  }

  it("parses every path GET / lists", () => {
    const paths = rootPaths("nodus.dev")
    assert.isTrue(paths.length > 0)
    for (const path of paths) assert.notStrictEqual(parse(path)._tag, "NotFound", path)
  })

  it("decodes any name, however encoded", () => {
    fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 12, unit: "grapheme" }), (name) => {
      assert.deepStrictEqual(
        parse(`/apis/nodus.dev/v1/namespaces/demo/jobs/${encodeURIComponent(name)}`),
        job({ namespace: "demo", name })
      )
    }))
  })
})
