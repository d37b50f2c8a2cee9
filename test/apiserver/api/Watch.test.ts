// Watches over real HTTP, read incrementally as newline-delimited JSON (kubectl-compat §6): event types for create,
// patch and delete; Go-style boolean parameters; synthetic ADDED events for resourceVersion unset or "0"; resuming from
// a resourceVersion; selector watches turning MODIFIED into ADDED/DELETED; timeoutSeconds; bookmarks; headers sent
// before any event; the errors a watch request can get before it starts; and what a watch holds for a client that does
// not keep up (a paged initial listing and replay, a 410 for a slow client, timeoutSeconds while it does not read).
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as MemoryStore from "../../../src/store/MemoryStore.ts"
import { Store } from "../../../src/store/Store.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { openSilentWatch } from "./SilentWatch.ts"
import {
  assertStatus,
  createJob,
  createProject,
  jobPath,
  jobsPath,
  mergePatch,
  openWatch,
  rv,
  sleep,
  startWatch,
  summary,
  v1,
  type Watcher
} from "./Support.ts"

/** Runs `body` with a watch that is always closed afterwards. */
const withWatch = async (
  server: TestServer,
  path: string,
  body: (watch: Watcher) => Promise<void>,
  options: { readonly headers?: Record<string, string> } = {}
): Promise<void> => {
  const watch = await openWatch(server, path, options)
  try {
    await body(watch)
  } finally {
    await watch.close()
  }
}

/** The list resourceVersion of a project's jobs: where a watch starting "now" resumes. */
const listVersion = async (server: TestServer, project: string): Promise<string> => {
  const reply = await request(server, "GET", jobsPath(project))
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body.metadata.resourceVersion as string
}

describe("watch", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer()
  })
  afterAll(() => server.stop())

  it("ADDED, MODIFIED and DELETED follow create, patch and delete, in order", async () => {
    await createProject(server, "watch-basic")
    await withWatch(server, `${jobsPath("watch-basic")}?watch=true`, async (watch) => {
      assert.strictEqual(watch.response.headers.get("content-type")?.split(";")[0], "application/json")
      const created = await createJob(server, "watch-basic", "j")
      const patched = await mergePatch(server, jobPath("watch-basic", "j"), { spec: { backoffLimit: 3 } })
      assert.strictEqual(patched.status, 200, patched.text)
      const deleted = await request(server, "DELETE", jobPath("watch-basic", "j"))
      assert.strictEqual(deleted.status, 200, deleted.text)
      const events = await watch.next(3)
      assert.deepStrictEqual(summary(events), ["ADDED j", "MODIFIED j", "DELETED j"])
      assert.strictEqual(events[0]!.object.metadata.uid, created.metadata.uid)
      assert.strictEqual(events[0]!.object.kind, "Job")
      assert.strictEqual(events[0]!.object.apiVersion, "nodus.dev/v1")
      assert.strictEqual(events[1]!.object.spec.backoffLimit, 3)
      assert.strictEqual(events[1]!.object.metadata.resourceVersion, patched.body.metadata.resourceVersion)
      assert.isAbove(rv(events[2]!.object), rv(events[1]!.object))
    })
  })

  const truthy: ReadonlyArray<string> = ["true", "True", "1", "t", "TRUE"]
  for (const value of truthy) {
    it(`watch=${value} opens a watch`, async () => {
      const project = `watch-bool-${truthy.indexOf(value)}`
      await createProject(server, project)
      await withWatch(server, `${jobsPath(project)}?watch=${value}`, async (watch) => {
        await createJob(server, project, "j")
        assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED j"])
      })
    })
  }

  it("watch=false is a plain list and watch=maybe a BadRequest", async () => {
    await createProject(server, "watch-false")
    const list = await request(server, "GET", `${jobsPath("watch-false")}?watch=false`)
    assert.strictEqual(list.status, 200, list.text)
    assert.strictEqual(list.body.kind, "JobList")
    assertStatus(server, await request(server, "GET", `${jobsPath("watch-false")}?watch=maybe`), 400, "BadRequest")
  })

  for (const resourceVersion of [undefined, "0"]) {
    it(`resourceVersion ${resourceVersion === undefined ? "unset" : `"${resourceVersion}"`} sends ADDED for existing objects first`, async () => {
      const project = `watch-initial-${resourceVersion ?? "unset"}`
      await createProject(server, project)
      await createJob(server, project, "b")
      await createJob(server, project, "a")
      const query = resourceVersion === undefined ? "watch=true" : `watch=true&resourceVersion=${resourceVersion}`
      await withWatch(server, `${jobsPath(project)}?${query}`, async (watch) => {
        const initial = await watch.next(2)
        assert.deepStrictEqual([...summary(initial)].sort(), ["ADDED a", "ADDED b"])
        await createJob(server, project, "c")
        assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED c"])
      })
    })
  }

  it("resuming from a resourceVersion replays exactly the later events", async () => {
    await createProject(server, "watch-resume")
    const first = await createJob(server, "watch-resume", "a")
    const patched = await mergePatch(server, jobPath("watch-resume", "a"), { metadata: { labels: { step: "2" } } })
    assert.strictEqual(patched.status, 200, patched.text)
    await createJob(server, "watch-resume", "b")
    assert.strictEqual((await request(server, "DELETE", jobPath("watch-resume", "a"))).status, 200)
    await withWatch(
      server,
      `${jobsPath("watch-resume")}?watch=true&resourceVersion=${first.metadata.resourceVersion}`,
      async (watch) => {
        const replayed = await watch.next(3)
        assert.deepStrictEqual(summary(replayed), ["MODIFIED a", "ADDED b", "DELETED a"])
        assert.deepStrictEqual(replayed[0]!.object.metadata.labels, { step: "2" })
        // Nothing else was replayed: the next event is the live one.
        await createJob(server, "watch-resume", "c")
        assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED c"])
      }
    )
  })

  it("resuming from the latest resourceVersion sends only new events", async () => {
    await createProject(server, "watch-latest")
    await createJob(server, "watch-latest", "old")
    const version = await listVersion(server, "watch-latest")
    await withWatch(server, `${jobsPath("watch-latest")}?watch=true&resourceVersion=${version}`, async (watch) => {
      await createJob(server, "watch-latest", "new")
      assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED new"])
    })
  })

  it("a watch sees only its own project; an all-projects watch sees every project", async () => {
    await createProject(server, "watch-scope-one")
    await createProject(server, "watch-scope-two")
    const version = await listVersion(server, "watch-scope-one")
    await withWatch(server, `${jobsPath("watch-scope-one")}?watch=true&resourceVersion=${version}`, async (own) => {
      await withWatch(server, `${v1}/jobs?watch=true&resourceVersion=${version}`, async (all) => {
        await createJob(server, "watch-scope-two", "elsewhere")
        await createJob(server, "watch-scope-one", "here")
        assert.deepStrictEqual(summary(await own.next(1)), ["ADDED here"])
        const events = await all.until((event) => event.object?.metadata?.name === "here")
        const names = events.map((event) => `${event.object.metadata.namespace}/${event.object.metadata.name}`)
        assert.includeMembers(names, ["watch-scope-two/elsewhere", "watch-scope-one/here"])
      })
    })
  })

  it("a label-selector watch sees ADDED when an object starts matching and DELETED when it stops", async () => {
    await createProject(server, "watch-labels")
    const version = await listVersion(server, "watch-labels")
    await withWatch(
      server,
      `${jobsPath("watch-labels")}?watch=true&resourceVersion=${version}&labelSelector=${
        encodeURIComponent("watched=yes")
      }`,
      async (watch) => {
        await createJob(server, "watch-labels", "j")
        const unwatched = await mergePatch(server, jobPath("watch-labels", "j"), { spec: { backoffLimit: 1 } })
        assert.strictEqual(unwatched.status, 200, unwatched.text)
        const start = await mergePatch(server, jobPath("watch-labels", "j"), {
          metadata: { labels: { watched: "yes" } }
        })
        assert.strictEqual(start.status, 200, start.text)
        const change = await mergePatch(server, jobPath("watch-labels", "j"), { spec: { backoffLimit: 2 } })
        assert.strictEqual(change.status, 200, change.text)
        const stop = await mergePatch(server, jobPath("watch-labels", "j"), { metadata: { labels: { watched: null } } })
        assert.strictEqual(stop.status, 200, stop.text)
        await createJob(server, "watch-labels", "k", { labels: { watched: "yes" } })
        const events = await watch.next(4)
        assert.deepStrictEqual(summary(events), ["ADDED j", "MODIFIED j", "DELETED j", "ADDED k"])
        assert.deepStrictEqual(events[0]!.object.metadata.labels, { watched: "yes" })
        assert.strictEqual(events[1]!.object.spec.backoffLimit, 2)
        assert.isUndefined(events[2]!.object.metadata.labels?.["watched"])
      }
    )
  })

  it("a fieldSelector metadata.name watch sees only that object (kubectl get NAME -w)", async () => {
    await createProject(server, "watch-name")
    await createJob(server, "watch-name", "other")
    await createJob(server, "watch-name", "mine")
    await withWatch(
      server,
      `${jobsPath("watch-name")}?watch=true&resourceVersion=0&fieldSelector=metadata.name%3Dmine`,
      async (watch) => {
        assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED mine"])
        assert.strictEqual(
          (await mergePatch(server, jobPath("watch-name", "other"), { spec: { backoffLimit: 1 } })).status,
          200
        )
        assert.strictEqual(
          (await mergePatch(server, jobPath("watch-name", "mine"), { spec: { backoffLimit: 2 } })).status,
          200
        )
        assert.deepStrictEqual(summary(await watch.next(1)), ["MODIFIED mine"])
      }
    )
  })

  it("a watch with kubectl's Table Accept sends each object as a one-row Table", async () => {
    await createProject(server, "watch-table")
    const accept =
      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    const version = await listVersion(server, "watch-table")
    await withWatch(server, `${jobsPath("watch-table")}?watch=true&resourceVersion=${version}`, async (watch) => {
      await createJob(server, "watch-table", "first")
      await createJob(server, "watch-table", "second")
      const events = await watch.next(2)
      assert.deepStrictEqual(events.map((event) => event.type), ["ADDED", "ADDED"])
      for (const [index, name] of ["first", "second"].entries()) {
        const table = events[index]!.object
        assert.strictEqual(table.kind, "Table", JSON.stringify(table))
        assert.strictEqual(table.rows.length, 1)
        assert.strictEqual(table.rows[0].cells[0], name)
        assert.strictEqual(table.rows[0].object.metadata.name, name)
      }
      assert.isAbove(events[0]!.object.columnDefinitions?.length ?? 0, 0)
    }, { headers: { accept } })
  })

  it("timeoutSeconds=1 ends the stream by itself", async () => {
    await createProject(server, "watch-timeout")
    const watch = await openWatch(server, `${jobsPath("watch-timeout")}?watch=true&timeoutSeconds=1`)
    try {
      assert.isTrue(await watch.ended(15_000), "the server did not close the stream")
    } finally {
      await watch.close()
    }
  })

  it("the response headers arrive before any event exists", async () => {
    await createProject(server, "watch-headers")
    const controller = new AbortController()
    const pending = startWatch(server, `${jobsPath("watch-headers")}?watch=true`, { signal: controller.signal })
    pending.catch(() => {})
    try {
      const outcome = await Promise.race([
        pending.then((response) => response),
        sleep(5_000).then(() => "no headers" as const)
      ])
      assert.notStrictEqual(outcome, "no headers", "fetch did not resolve while nothing was written")
      const response = outcome as Response
      assert.strictEqual(response.status, 200)
      // Nothing was written: the project is still empty.
      const list = await request(server, "GET", jobsPath("watch-headers"))
      assert.deepStrictEqual(list.body.items, [])
    } finally {
      controller.abort()
    }
  })

  const refused: ReadonlyArray<
    { readonly name: string; readonly path: string; readonly status: number; readonly reason: string }
  > = [
    {
      name: "a non-numeric resourceVersion",
      path: `${jobsPath("watch-refused")}?watch=true&resourceVersion=abc`,
      status: 400,
      reason: "BadRequest"
    },
    {
      name: "a resourceVersion of 2^64",
      path: `${jobsPath("watch-refused")}?watch=true&resourceVersion=18446744073709551616`,
      status: 400,
      reason: "BadRequest"
    },
    {
      name: "a resourceVersion far above 2^64",
      path: `${jobsPath("watch-refused")}?watch=true&resourceVersion=99999999999999999999999`,
      status: 400,
      reason: "BadRequest"
    },
    {
      name: "a negative resourceVersion",
      path: `${jobsPath("watch-refused")}?watch=true&resourceVersion=-5`,
      status: 400,
      reason: "BadRequest"
    },
    {
      name: "an invalid label selector",
      path: `${jobsPath("watch-refused")}?watch=true&labelSelector=${encodeURIComponent("a in (")}`,
      status: 400,
      reason: "BadRequest"
    },
    {
      name: "an unsupported field label",
      path: `${jobsPath("watch-refused")}?watch=true&fieldSelector=spec.image%3Dx`,
      status: 400,
      reason: "BadRequest"
    },
    {
      name: "a missing project",
      path: `${jobsPath("watch-no-such-project")}?watch=true`,
      status: 404,
      reason: "NotFound"
    },
    {
      name: "a non-integer timeoutSeconds",
      path: `${jobsPath("watch-refused")}?watch=true&timeoutSeconds=soon`,
      status: 400,
      reason: "BadRequest"
    }
  ]
  for (const testCase of refused) {
    it(`a watch with ${testCase.name} is refused with ${testCase.status} before it starts`, async () => {
      await request(server, "POST", "/api/v1/namespaces", {
        body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "watch-refused" } }
      })
      assert.strictEqual((await request(server, "GET", "/api/v1/namespaces/watch-refused")).status, 200)
      const reply = await request(server, "GET", testCase.path)
      assertStatus(server, reply, testCase.status, testCase.reason)
    })
  }
})

describe("watch bookmarks", () => {
  let server: TestServer

  beforeAll(async () => {
    server = await startTestServer({ bookmarkInterval: "200 millis" })
    await createProject(server, "bookmarks")
  })
  afterAll(() => server.stop())

  it("allowWatchBookmarks=true yields BOOKMARK events carrying a resourceVersion", async () => {
    const created = await createJob(server, "bookmarks", "j")
    await withWatch(server, `${jobsPath("bookmarks")}?watch=true&allowWatchBookmarks=true`, async (watch) => {
      const events = await watch.until((event) => event.type === "BOOKMARK")
      assert.deepStrictEqual(summary(events.slice(0, 1)), ["ADDED j"])
      const bookmark = events.at(-1)!
      assert.strictEqual(bookmark.object.kind, "Job")
      assert.strictEqual(bookmark.object.apiVersion, "nodus.dev/v1")
      assert.isString(bookmark.object.metadata.resourceVersion)
      assert.isAtLeast(rv(bookmark.object), rv(created))
    })
  })

  it("bookmarks move forward with changes the watch did not match", async () => {
    const version = await listVersion(server, "bookmarks")
    await withWatch(
      server,
      `${
        jobsPath("bookmarks")
      }?watch=true&allowWatchBookmarks=true&resourceVersion=${version}&labelSelector=none%3Dmatch`,
      async (watch) => {
        const unmatched = await createJob(server, "bookmarks", "unmatched")
        const events = await watch.until(
          (event) => event.type === "BOOKMARK" && rv(event.object) >= rv(unmatched),
          10_000
        )
        assert.isTrue(events.every((event) => event.type === "BOOKMARK"), JSON.stringify(summary(events)))
      }
    )
  })

  it("without allowWatchBookmarks no BOOKMARK is sent", async () => {
    const version = await listVersion(server, "bookmarks")
    await withWatch(server, `${jobsPath("bookmarks")}?watch=true&resourceVersion=${version}`, async (plain) => {
      await withWatch(
        server,
        `${jobsPath("bookmarks")}?watch=true&allowWatchBookmarks=true&resourceVersion=${version}`,
        async (bookmarked) => {
          // Two bookmarks on the other watch: bookmark time has passed for the plain watch too.
          await bookmarked.until((event) => event.type === "BOOKMARK")
          await bookmarked.until((event) => event.type === "BOOKMARK")
          await createJob(server, "bookmarks", "marker")
          assert.deepStrictEqual(summary(await plain.next(1)), ["ADDED marker"])
        }
      )
    })
  })
})

describe("watch beyond the retained change log", () => {
  let server: TestServer
  // The test holds the store itself, so it can compact the change log as the server's maintenance would.
  const store = Effect.runSync(MemoryStore.make)
  // A small ring, so that an old resourceVersion is served from the store's log, not from the feed's memory.
  const feed = { bufferSize: 2, subscriberLag: 1_000, pageSize: 100, pollInterval: "1 second" as const }

  beforeAll(async () => {
    server = await startTestServer({ store: Layer.succeed(Store, store), feed })
  })
  afterAll(() => server.stop())

  it("a resourceVersion older than the log ends the watch with an ERROR event carrying a 410 Expired Status", async () => {
    await createProject(server, "expired")
    const first = await createJob(server, "expired", "j0")
    for (let i = 1; i <= 5; i++) await createJob(server, "expired", `j${i}`)
    // Within the log: resuming from the first job replays the later five.
    await withWatch(server, `${jobsPath("expired")}?watch=true&resourceVersion=${rv(first)}`, async (watch) => {
      assert.deepStrictEqual(summary(await watch.next(5)), ["ADDED j1", "ADDED j2", "ADDED j3", "ADDED j4", "ADDED j5"])
    })
    await Effect.runPromise(Effect.flatMap(store.resourceVersion, (latest) => store.compact(latest - 2)))
    await withWatch(server, `${jobsPath("expired")}?watch=true&resourceVersion=${rv(first)}`, async (watch) => {
      const [event] = await watch.next(1)
      assert.strictEqual(event!.type, "ERROR")
      const status = event!.object as unknown as { kind: string; code: number; reason: string }
      assert.deepStrictEqual({ kind: status.kind, code: status.code, reason: status.reason }, {
        kind: "Status",
        code: 410,
        reason: "Expired"
      })
      assert.isTrue(await watch.ended(5_000), "the stream ends after the 410")
    })
  })
})

describe("watch replaying the change log a page at a time", () => {
  let server: TestServer
  // No ring to speak of and two changes per log read: a replay of six changes takes three reads.
  const feed = { bufferSize: 1, subscriberLag: 1_000, pageSize: 2, pollInterval: "1 second" as const }

  beforeAll(async () => {
    server = await startTestServer({ feed })
  })
  afterAll(() => server.stop())

  it("resuming from a resourceVersion replays every later change in order, across log pages", async () => {
    await createProject(server, "paged-replay")
    const first = await createJob(server, "paged-replay", "j0")
    for (let i = 1; i <= 6; i++) await createJob(server, "paged-replay", `j${i}`)
    await withWatch(server, `${jobsPath("paged-replay")}?watch=true&resourceVersion=${rv(first)}`, async (watch) => {
      assert.deepStrictEqual(summary(await watch.next(6)), [
        "ADDED j1",
        "ADDED j2",
        "ADDED j3",
        "ADDED j4",
        "ADDED j5",
        "ADDED j6"
      ])
      await createJob(server, "paged-replay", "live")
      assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED live"])
    })
  })
})

describe("watch backpressure", () => {
  let server: TestServer
  // A small buffer, a short wait for room, and a long grace so that a client that reads again still gets the 410.
  const limits = { buffer: 4, slowAfter: "100 millis", drainGrace: "30 seconds" } as const
  // 200 KB per object: a few dozen events fill the sockets between the server and a client that does not read.
  const bulk = "x".repeat(200 * 1024)

  beforeAll(async () => {
    server = await startTestServer({ watchLimits: limits })
  })
  afterAll(() => server.stop())

  it("a client that stops reading live changes is closed with a 410 Expired ERROR event, not sent every change", async () => {
    await createProject(server, "slow-watcher")
    await createJob(server, "slow-watcher", "j")
    const version = await listVersion(server, "slow-watcher")
    const watch = await openSilentWatch(server, `${jobsPath("slow-watcher")}?watch=true&resourceVersion=${version}`)
    try {
      const patches = 60
      for (let round = 0; round < patches; round++) {
        const patched = await mergePatch(server, jobPath("slow-watcher", "j"), {
          metadata: { annotations: { bulk, round: String(round) } }
        })
        assert.strictEqual(patched.status, 200, patched.text)
      }
      // Well past slowAfter: the watch has given up on this client by now.
      await sleep(1_000)
      const result = await watch.resume()
      assert.strictEqual(result.status, 200)
      assert.isTrue(result.complete, "the watch ends with its last chunk")
      const last = result.events.at(-1)!
      assert.deepInclude(last, { type: "ERROR" }, JSON.stringify(summary(result.events)))
      assert.deepInclude(last.object, { kind: "Status", code: 410, reason: "Expired" })
      const modified = result.events.slice(0, -1)
      assert.isTrue(modified.every((event) => event.type === "MODIFIED"), JSON.stringify(summary(modified)))
      // What came is the changes in order, up to where the watch stopped reading: not all of them.
      assert.deepStrictEqual(
        modified.map((event) => Number(event.object.metadata.annotations.round)),
        modified.map((_, index) => index)
      )
      assert.isBelow(modified.length, patches)
    } finally {
      watch.close()
    }
  })

  it("the initial listing is read a page of `buffer` objects at a time, then live events follow", async () => {
    await createProject(server, "paged-listing")
    const names = Array.from({ length: 3 * limits.buffer + 1 }, (_, index) => `j${String(index).padStart(2, "0")}`)
    for (const name of names) await createJob(server, "paged-listing", name)
    await withWatch(server, `${jobsPath("paged-listing")}?watch=true`, async (watch) => {
      const initial = await watch.next(names.length)
      assert.deepStrictEqual(summary(initial), names.map((name) => `ADDED ${name}`))
      await createJob(server, "paged-listing", "live")
      assert.deepStrictEqual(summary(await watch.next(1)), ["ADDED live"])
    })
  })
})

describe("watch timeoutSeconds while the client does not read", () => {
  let server: TestServer
  const limits = { buffer: 4, slowAfter: "1 second", drainGrace: "200 millis" } as const

  beforeAll(async () => {
    server = await startTestServer({ watchLimits: limits })
  })
  afterAll(() => server.stop())

  it("the server cuts the connection at timeoutSeconds (and drainGrace) even while its writes wait for the client", async () => {
    await createProject(server, "stalled-timeout")
    const objects = 60
    const bulk = "x".repeat(200 * 1024)
    for (let index = 0; index < objects; index++) {
      await createJob(server, "stalled-timeout", `j${index}`, { annotations: { bulk } })
    }
    // Two seconds leave the server time to fill the socket before the deadline, so that its writes then wait.
    const watch = await openSilentWatch(server, `${jobsPath("stalled-timeout")}?watch=true&timeoutSeconds=2`)
    try {
      // Past timeoutSeconds and drainGrace: the server has given up writing the listing to this client.
      await sleep(3_500)
      const result = await watch.resume()
      assert.strictEqual(result.status, 200)
      assert.isFalse(
        result.complete,
        "the response was cut while the client was not reading, not finished when it read again"
      )
      assert.isBelow(result.events.length, objects)
      assert.isTrue(result.events.every((event) => event.type === "ADDED"), JSON.stringify(summary(result.events)))
    } finally {
      watch.close()
    }
  })
})
