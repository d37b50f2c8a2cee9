/**
 * FunctionCalls on servers that share one PostgreSQL database (issue 16, docs/scale-out.md): three `nodus serve
 * --backend sim` processes, Functions and their calls created through all of them, one server killed with SIGKILL
 * while calls run and started again. Each call is held and dispatched by the owner of its Function's shard only
 * (runtime/FunctionDispatch.ts): at the end every call has Succeeded with its own input echoed, and its stored status,
 * in the change log from its creation on, entered its final phase once and its result was written once (a process
 * holding a stale copy of a call it took over would run it again and write it again).
 *
 * Runs when DATABASE_URL is set; bounded (a deadline on every wait), loopback only.
 */
import { assert, describe, it } from "@effect/vitest"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { eventually } from "../support/Eventually.ts"
import { databaseUrl, suiteDatabase } from "../support/Postgres.ts"
import { removeTree } from "../support/RemoveTree.ts"
import {
  alive,
  callAs,
  type ClusterServer,
  everyShardHeld as heldByAll,
  killNow,
  spawnClusterServer
} from "../support/ServerProcess.ts"

const token = "nds_calls-test-token-0123456789abcdefghijklmnopqrstu"
const calls = "/apis/nodus.dev/v1/namespaces/calls/functioncalls"
const functions = "/apis/nodus.dev/v1/namespaces/calls/functions"
const finalPhases = new Set(["Succeeded", "Failed", "Cancelled"])
const call = callAs(token)

/** Functions: enough that the killed server owns some of them (each shard goes to one of three servers). */
const functionCount = 12
/** Simulated seconds per second: a call's minute is a second here. */
const speed = 60

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64")
const unb64 = (text: string | undefined) => JSON.parse(Buffer.from(text ?? "", "base64").toString("utf8"))
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Every change of the project's FunctionCalls after `since`, in order: a watch from there, ended by its timeout. */
const changeLog = async (
  url: string,
  since: string
): Promise<ReadonlyArray<{ readonly type: string; readonly object: any }>> => {
  const response = await fetch(`${url}${calls}?watch=true&resourceVersion=${since}&timeoutSeconds=5`, {
    headers: { authorization: `Bearer ${token}` }
  })
  const text = await response.text()
  return text.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line)).filter((event) =>
    event.type !== "BOOKMARK"
  )
}

/**
 * What is wrong with the calls' histories: a call that entered a final phase more than once (or left it), whose result
 * was written more than once, or that did not end Succeeded with its own input.
 */
const checkCalls = (
  names: ReadonlyArray<string>,
  stored: ReadonlyArray<any>,
  history: ReadonlyArray<{ readonly object: any }>
): Array<string> => {
  const violations: Array<string> = []
  const byName = new Map(stored.map((object) => [object.metadata.name as string, object]))
  for (const name of names) {
    const status = byName.get(name)?.status ?? {}
    if (status.phase !== "Succeeded" || unb64(status.result?.inline) !== name) {
      violations.push(`${name}: ended ${status.phase} ${status.reason ?? ""} with ${status.result?.inline}`)
    }
  }
  const statuses = new Map<string, Array<any>>()
  for (const { object } of history) {
    statuses.set(object.metadata.name, [...(statuses.get(object.metadata.name) ?? []), object.status ?? {}])
  }
  for (const [name, seen] of statuses) {
    let finals = 0
    let results = 0
    let phase: string | undefined
    let result: string | undefined
    for (const status of seen) {
      if (finalPhases.has(status.phase) && !finalPhases.has(phase ?? "")) finals++
      if (finalPhases.has(phase ?? "") && !finalPhases.has(status.phase)) {
        violations.push(`${name}: left ${phase} for ${status.phase}`)
      }
      const shown = JSON.stringify(status.result ?? null)
      if (status.result !== undefined && shown !== result) results++
      phase = status.phase
      result = shown
    }
    if (finals !== 1) {
      violations.push(
        `${name}: entered a final phase ${finals} times (${seen.map((status) => status.phase).join(" → ")})`
      )
    }
    if (results !== 1) violations.push(`${name}: its result was written ${results} times`)
  }
  return violations
}

describe.skipIf(databaseUrl === undefined)(
  "FunctionCalls on three servers on one PostgreSQL database, one killed under them",
  () => {
    const database = suiteDatabase()

    it("every call ends Succeeded once, its result written once, dispatched by its Function's owner only", async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "nodus-calls-"))
      const servers: Array<ClusterServer> = []
      const spawnServer = () => spawnClusterServer({ databaseUrl: database.url, dataDir, speed, token })
      const started = Date.now()
      const deadline = started + 180_000
      const everyShardHeld = () => heldByAll(servers)
      let turn = 0
      /** A live server's answer, taking turns; a server killed meanwhile is skipped. */
      const anyServer = async (method: string, path: string, body?: unknown) => {
        for (let tries = 0;; tries++) {
          const live = servers.filter((server) => alive(server.child))
          try {
            return await call(live[turn++ % live.length]!.url, method, path, body)
          } catch (error) {
            if (tries > 20) throw error
            await pause(200)
          }
        }
      }
      const names: Array<string> = []
      const createCalls = async (perFunction: number) => {
        const made = Array.from(
          { length: functionCount * perFunction },
          (_, index) => ({ fn: index % functionCount, name: `call-${names.length + index}` })
        )
        await Promise.all(made.map(async ({ fn, name }) => {
          const body = {
            apiVersion: "nodus.dev/v1",
            kind: "FunctionCall",
            metadata: { name },
            spec: { function: `fn-${fn}`, input: { encoding: "JSON", inline: b64({ args: [name], kwargs: {} }) } }
          }
          const reply = await anyServer("POST", calls, body)
          // A create whose server died after committing answers nothing: it is there, or it is made again.
          assert.include([201, 409], reply.status, reply.text)
        }))
        names.push(...made.map(({ name }) => name))
      }
      const listCalls = async () => ((await anyServer("GET", calls)).body?.items ?? []) as Array<any>
      const finalCount = async () =>
        (await listCalls()).filter((object) => finalPhases.has(object.status?.phase)).length
      try {
        for (let index = 0; index < 3; index++) servers.push(await spawnServer())
        await eventually("every shard held", everyShardHeld, { timeoutMs: 60_000 })
        const created = await call(servers[0]!.url, "POST", "/api/v1/namespaces", {
          apiVersion: "v1",
          kind: "Namespace",
          metadata: { name: "calls" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const since = created.body.metadata.resourceVersion as string
        for (let fn = 0; fn < functionCount; fn++) {
          // One worker taking two calls at once: a batch of ten runs five simulated minutes, so the kill finds calls at
          // every stage.
          const body = {
            apiVersion: "nodus.dev/v1",
            kind: "Function",
            metadata: { name: `fn-${fn}`, annotations: { "sim.nodus.dev/call-duration": "1m" } },
            spec: {
              image: "python:3.12",
              code: { module: "app", qualname: "echo" },
              scaling: { minWorkers: 1, maxWorkers: 1, targetConcurrency: 2 }
            }
          }
          const reply = await anyServer("POST", functions, body)
          assert.strictEqual(reply.status, 201, reply.text)
        }
        await createCalls(10)
        await eventually("half the first calls ended", async () => (await finalCount()) >= names.length / 2, {
          timeoutMs: 90_000
        })

        const victim = servers[1]!
        await killNow(victim.child)
        await eventually("the other servers hold every shard", everyShardHeld, { timeoutMs: 60_000 })
        await createCalls(10)
        servers[1] = await spawnServer()
        await eventually("every shard held again", everyShardHeld, { timeoutMs: 60_000 })
        await createCalls(5)

        while (Date.now() < deadline && (await finalCount()) < names.length) await pause(500)
        // A little longer: a call run again by a stale owner would show in the change log.
        await pause(3_000)
        const stored = await listCalls()
        const history = await changeLog(servers[0]!.url, since)
        const violations = checkCalls(names, stored, history)
        console.log(
          `function calls: ${names.length} calls, ${history.length} changes, ${violations.length} violations, ${
            Date.now() - started
          } ms`
        )
        assert.strictEqual(stored.length, names.length)
        assert.deepStrictEqual(violations.slice(0, 20), [])
      } finally {
        await Promise.all(servers.map((server) => killNow(server.child)))
        await removeTree(dataDir)
      }
    }, 300_000)
  }
)
