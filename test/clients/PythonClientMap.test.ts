/**
 * The Python client's `.map()` against a scripted Functions server (test/client/MapStub.ts, the one the TypeScript
 * client's map tests use): results in input order and as calls end, return_exceptions, a blob result, one watch of
 * the map's label instead of a long poll per call, and watches that end mid-map (the server ending them, a dropped
 * connection, 410 Expired) resumed from a new listing with nothing lost or given twice (docs/clients.md, "Waiting for
 * a result"). Runs the client in a real python3.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { type MapStub, type MapStubOptions, startMapStub } from "../client/MapStub.ts"
import { py } from "./Python.ts"

let stub: MapStub | undefined
afterEach(async () => {
  await stub?.close()
  stub = undefined
})

/** The stub, and the environment pointing a client at it. */
const serve = async (options: MapStubOptions = {}) => {
  stub = await startMapStub(options)
  return { NODUS_URL: stub.url, NODUS_TOKEN: "nds_stub" }
}

/** What a map yields, as JSON: values, and errors as their class names. */
const shown = `
def shown(items):
    return [type(item).__name__ if isinstance(item, Exception) else item for item in items]
`

describe("the Python client's map over a scripted Functions server", () => {
  it("results in input order, and as calls end; one watch of its label from a listing made first; no result long polls; a blob result", async () => {
    const env = await serve()
    const report = await py(
      `${shown}
f = nodus.Client().function("p", "double")
report(lambda: {"ordered": list(f.map([1, "big", 3])), "unordered": list(f.map([5, 7], order_outputs=False))})
`,
      env
    )
    assert.deepStrictEqual(report.ok, { ordered: [2, "big!", 6], unordered: [14, 10] }, JSON.stringify(report))
    const requests = stub!.seen.map((seen) => `${seen.method} ${decodeURIComponent(seen.url)}`)
    const mapId = stub!.posts[0]!.body.mapId
    const list = requests.findIndex((line) =>
      line.includes(`labelSelector=nodus.dev/map=${mapId}`) && !line.includes("watch=")
    )
    const batch = requests.findIndex((line) => line.startsWith("POST ") && line.endsWith("/map"))
    assert.isAtLeast(list, 0, requests.join("\n"))
    assert.isBelow(list, batch)
    assert.lengthOf(stub!.watches, 2)
    assert.isFalse(requests.some((line) => line.includes("/result")), requests.join("\n"))
  })

  it("return_exceptions gives a failed call's RemoteError and a deleted call's NotFoundError in their places; without it the map raises", async () => {
    const env = await serve()
    const report = await py(
      `${shown}
f = nodus.Client().function("p", "double")
given = shown(f.map([1, "gone", "boom", 4], return_exceptions=True))
try:
    list(f.map([1, "boom"]))
    raised = None
except nodus.RemoteError as e:
    raised = [type(e).__name__, e.remote_type, e.remote_traceback]
try:
    list(f.map([1, "gone"]))
    gone = None
except nodus.NotFoundError as e:
    gone = [type(e).__name__, e.status_code]
report(lambda: {"given": given, "raised": raised, "gone": gone})
`,
      env
    )
    assert.deepStrictEqual(report.ok, {
      given: [2, "NotFoundError", "RemoteError", 8],
      raised: ["RemoteError", "ValueError", "Traceback: …"],
      gone: ["NotFoundError", 404]
    }, JSON.stringify(report))
  })

  for (const watchEnd of ["end", "drop", "expire"] as const) {
    it(`watches that end mid-map (${watchEnd}) are resumed from a new listing, no result lost or given twice`, async () => {
      const env = await serve({ watchEvents: 7, watchEnd })
      const report = await py(
        `
f = nodus.Client().function("p", "double")
report(lambda: {"ordered": list(f.map(range(60))), "unordered": sorted(f.map(range(60), order_outputs=False))})
`,
        env
      )
      const doubled = Array.from({ length: 60 }, (_, index) => index * 2)
      assert.deepStrictEqual(report.ok, { ordered: doubled, unordered: doubled }, JSON.stringify(report))
      const lists = stub!.seen.filter((seen) =>
        seen.method === "GET" && seen.url.includes("labelSelector=") && !seen.url.includes("watch=")
      )
      assert.isAtLeast(lists.length, 4)
      assert.isTrue(stub!.watches.every((watch) => watch.sent <= 7))
    })
  }

  it("watches that end at once, again and again, fail the map after max_retries resumptions (finite retries)", async () => {
    const env = await serve({ watchEvents: 0 })
    const report = await py(
      `
report(lambda: list(nodus.Client(max_retries=2, max_retry_wait=0.01).function("p", "double").map(["never"])))
`,
      env
    )
    assert.strictEqual(report.error, "APIConnectionError", JSON.stringify(report))
    assert.lengthOf(stub!.watches, 3)
  })
})
