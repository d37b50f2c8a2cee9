/**
 * The request fuzz at volume (hardening issue, item 10): the requests of test/support/RequestFuzz.ts — hostile paths,
 * query parameters, headers and bodies — sent by several concurrent clients to a whole server in this process, on the
 * embedded PGlite and, when reachable, on PostgreSQL. Every answer must be below 500 and every error a Status body.
 * Prints the answers by status, the requests per second, and each failure (the first 20); exits 1 on any failure or
 * on a request that got no answer.
 *
 *   npm run bench:fuzz -- [--requests 100000] [--clients 4] [--seed 1] [--database-url postgres://…]
 */
import { Layer } from "effect"
import * as fc from "fast-check"
import * as SqlStore from "../src/store/SqlStore.ts"
import { registeredCodes } from "../test/apiserver/api/Support.ts"
import { createDatabase } from "../test/support/Postgres.ts"
import {
  type FuzzRequest,
  prepareTarget,
  replyProblem,
  requestArbitrary,
  send,
  unsendable
} from "../test/support/RequestFuzz.ts"
import { startTestServer, type TestServer } from "../test/support/TestServer.ts"
import { argument } from "./Arguments.ts"

const requests = Number(argument("requests", "100000"))
const clients = Number(argument("clients", "4"))
const seed = Number(argument("seed", "1"))
const adminUrl = argument("database-url", process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
/** Requests generated at a time: the whole run would not fit in memory at once. */
const batchSize = 1_000
const answerTimeoutMs = 30_000

interface Outcome {
  readonly byStatus: Map<number, number>
  readonly failures: Array<string>
  readonly unsent: number
  readonly seconds: number
}

const run = async (server: TestServer): Promise<Outcome> => {
  const context = await prepareTarget(server.url, server.token, "fuzz")
  const arbitrary = requestArbitrary(context)
  const byStatus = new Map<number, number>()
  const failures: Array<string> = []
  let unsent = 0
  const started = performance.now()
  const one = async (sent: FuzzRequest) => {
    const reply = await send(server.url, sent, answerTimeoutMs).catch((error: Error) => error)
    if (reply instanceof Error) {
      if (unsendable(reply)) unsent++
      else failures.push(`${sent.method} ${sent.path}: no answer (${reply.message})`)
      return
    }
    byStatus.set(reply.status, (byStatus.get(reply.status) ?? 0) + 1)
    const problem = replyProblem(reply, registeredCodes)
    if (problem !== undefined) failures.push(`${sent.method} ${sent.path.slice(0, 200)}: ${problem}`)
  }
  for (let done = 0; done < requests; done += batchSize) {
    const batch = fc.sample(arbitrary, { numRuns: Math.min(batchSize, requests - done), seed: seed + done })
    let next = 0
    await Promise.all(Array.from({ length: clients }, async () => {
      while (next < batch.length) await one(batch[next++]!)
    }))
    process.stderr.write(`\r  ${Math.min(done + batchSize, requests)} / ${requests}`)
  }
  process.stderr.write("\n")
  return { byStatus, failures, unsent, seconds: (performance.now() - started) / 1_000 }
}

const report = (store: string, outcome: Outcome): boolean => {
  const sent = [...outcome.byStatus.values()].reduce((sum, count) => sum + count, 0)
  const statuses = [...outcome.byStatus.entries()].sort(([a], [b]) => a - b).map(([status, count]) =>
    `${status}×${count}`
  ).join(" ")
  console.log(
    `${store}: ${sent} answers in ${outcome.seconds.toFixed(1)} s (${
      (sent / outcome.seconds).toFixed(0)
    } requests/s, ${clients} clients); ${outcome.unsent} not sendable by fetch`
  )
  console.log(`  by status: ${statuses}`)
  console.log(`  failures: ${outcome.failures.length}`)
  for (const failure of outcome.failures.slice(0, 20)) console.log(`    ${failure}`)
  return outcome.failures.length === 0
}

const main = async () => {
  let passed = true
  const pglite = await startTestServer({ store: Layer.fresh(SqlStore.layerPglite(undefined)) })
  passed = report("PGlite", await run(pglite)) && passed
  await pglite.stop()
  const database = await createDatabase(adminUrl).catch(() => undefined)
  if (database === undefined) console.log(`PostgreSQL: not reachable at ${adminUrl}; skipped`)
  else {
    const server = await startTestServer({ store: Layer.fresh(SqlStore.layerPostgres(database.url)) })
    passed = report("PostgreSQL", await run(server)) && passed
    await server.stop()
    await database.drop()
  }
  process.exit(passed ? 0 : 1)
}

await main()
