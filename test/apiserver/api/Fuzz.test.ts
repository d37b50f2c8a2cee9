// The request fuzz (hardening issue, item 10): fast-check sends 10^4 requests per run — paths, query parameters,
// headers and bodies a careless client or an attacker sends (test/support/RequestFuzz.ts) — to a server on the embedded
// PGlite, and every answer must be below 500 with every error a Status body. bench/fuzz.ts runs more. Also here: a 5xx
// that does happen (the store fails) is logged with the request id the client was given.
import { afterAll, assert, beforeAll, describe, it, vi } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fc from "fast-check"
import * as MemoryStore from "../../../src/store/MemoryStore.ts"
import * as SqlStore from "../../../src/store/SqlStore.ts"
import { Store, StoreError } from "../../../src/store/Store.ts"
import {
  type FuzzContext,
  prepareTarget,
  replyProblem,
  requestArbitrary,
  send,
  unsendable
} from "../../support/RequestFuzz.ts"
import { request, startTestServer, type TestServer } from "../../support/TestServer.ts"
import { assertStatus, createProject, jobsPath, registeredCodes } from "./Support.ts"

/** Requests per CI run; NODUS_FUZZ_RUNS raises it (bench/fuzz.ts does). */
const runs = Number(process.env["NODUS_FUZZ_RUNS"] ?? 10_000)

describe("request fuzz on PGlite", () => {
  let server: TestServer
  let context: FuzzContext

  beforeAll(async () => {
    server = await startTestServer({ store: Layer.fresh(SqlStore.layerPglite(undefined)) })
    context = await prepareTarget(server.url, server.token, "fuzz")
  }, 60_000)
  afterAll(() => server?.stop())

  it(`${runs} requests: no 5xx, every error a Status`, async () => {
    await fc.assert(
      fc.asyncProperty(requestArbitrary(context), async (sent) => {
        const reply = await send(server.url, sent, 20_000).catch((error: Error) => error)
        if (reply instanceof Error) {
          if (unsendable(reply)) return
          throw reply
        }
        const problem = replyProblem(reply, registeredCodes)
        if (problem !== undefined) throw new Error(`${sent.method} ${sent.path}: ${problem}`)
      }),
      { numRuns: runs, seed: Number(process.env["NODUS_FUZZ_SEED"] ?? 20261125) }
    )
  }, 600_000)
})

describe("a 5xx that happens is logged with its request id", () => {
  let server: TestServer
  // A store whose lists fail in one project, as a store that lost its disk would.
  const failingLists = Layer.effect(
    Store,
    Effect.map(Store, (store): Store["Service"] => ({
      ...store,
      list: (query) => (query.namespace === "broken"
        ? Effect.fail(new StoreError({ message: "the disk is gone" }))
        : store.list(query)),
      listText: (query) => (query.namespace === "broken"
        ? Effect.fail(new StoreError({ message: "the disk is gone" }))
        : store.listText(query))
    }))
  ).pipe(Layer.provide(Layer.fresh(MemoryStore.layer)))

  beforeAll(async () => {
    server = await startTestServer({ store: failingLists })
    await createProject(server, "broken")
  })
  afterAll(() => server?.stop())

  it("Unavailable, logged with the id", async () => {
    const lines: Array<string> = []
    const capture = (...args: ReadonlyArray<unknown>) => void lines.push(args.map(String).join(" "))
    const spies = [
      vi.spyOn(console, "log").mockImplementation(capture),
      vi.spyOn(console, "error").mockImplementation(capture)
    ]
    try {
      const reply = await request(server, "GET", jobsPath("broken"))
      const body = assertStatus(server, reply, 503, "Unavailable")
      assert.isTrue(
        lines.some((line) => line.includes(body.requestId)),
        `no log line names ${body.requestId}: ${JSON.stringify(lines)}`
      )
    } finally {
      for (const spy of spies) spy.mockRestore()
    }
  })
})
