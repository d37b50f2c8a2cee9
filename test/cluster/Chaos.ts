/**
 * The chaos harness (issue 16, docs/scale-out.md): `nodus serve --backend sim` processes on one PostgreSQL database,
 * Jobs created through all of them, one of them killed with SIGKILL at random and restarted, over and over; then the
 * invariants of owned controllers, read from the store and the API:
 *
 * - every Job reached a final phase, exactly once: its stored phase, in the change log from its creation on, moves
 *   into a final phase once and never out of it (two owners with two clocks flipped Succeeded → Running);
 * - each Attempt was launched once: created once (no Attempt of a Job deleted and made again), and no two Attempts of
 *   a Job ran the same index at the same time;
 * - the ledger's charges equal the metered runs: per Job, the stored postings' charges equal `status.cost`, the
 *   runs its Attempts record, metered, are what it was charged, and no hold is left open;
 * - no event duplicated beyond at-least-once: each Job's final event is recorded once, and each phase's Event is
 *   counted as often as the Job's stored status entered that phase;
 * - webhooks (ChaosWebhooks.ts): every Job's final event reaches a loopback receiver as one delivery, signed, while
 *   the sender (a singleton) moves with the kills; a rotation and a replay made through two servers take effect.
 *
 * The short form runs in the suite (test/cluster/Chaos.test.ts), the long one as `npm run bench:chaos`. Loopback only:
 * the servers listen on 127.0.0.1 and reach nothing else.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import { appendFileSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Ledger } from "../../src/core/billing/Ledger.ts"
import { meterAttempt } from "../../src/core/billing/Metering.ts"
import { currentPricebook, ruleOf } from "../../src/core/billing/Pricebook.ts"
import { variantsOf } from "../../src/core/capacity/Offering.ts"
import type { JsonObject } from "../../src/core/Json.ts"
import { parseMicroUsd } from "../../src/core/Money.ts"
import { loadCatalog } from "../../src/data/CatalogData.ts"
import { factsFromAttempt } from "../../src/kinds/attempt/AttemptRecords.ts"
import * as SqlStore from "../../src/store/SqlStore.ts"
import { Store } from "../../src/store/Store.ts"
import { eventually } from "../support/Eventually.ts"
import { removeTree } from "../support/RemoveTree.ts"
import {
  alive as isAlive,
  callAs,
  type ClusterServer,
  everyShardHeld as heldByAll,
  spawnClusterServer
} from "../support/ServerProcess.ts"
import {
  checkDeliveries,
  checkReplayAfterRotation,
  missingFinalEvents,
  resent,
  startWebhooks,
  type Webhooks
} from "./ChaosWebhooks.ts"

export interface ChaosOptions {
  /** An empty database of its own. */
  readonly databaseUrl: string
  readonly servers: number
  readonly jobs: number
  /** Simulated seconds per second. */
  readonly speed: number
  /** Each Job's simulated run time is drawn from these (`sim.nodus.dev/duration`). */
  readonly durations: ReadonlyArray<string>
  /** Indexes per Job (default 1). */
  readonly completions?: number
  /** Kills (each followed by a restart of the killed server). */
  readonly kills: number
  /** Real time between a restart and the next kill. */
  readonly killEveryMs: number
  /** How long everything may take, from the first create to the last Job's final phase. */
  readonly deadlineMs: number
  /** Seeds the choice of whom to kill and the Jobs' durations. */
  readonly seed: number
  readonly log?: (line: string) => void
  /**
   * Writes what was read at the end (Jobs, Attempts, Events, the change log, holds) to this file, for a post-mortem.
   */
  readonly dumpTo?: string
  /** Appends what each server process prints to `<logDir>/server-<index>.log`. */
  readonly logDir?: string
}

export interface ChaosReport {
  readonly violations: ReadonlyArray<string>
  /** Per kill: how long until the other servers held every shard (ms), or undefined if they never did in time. */
  readonly takeoversMs: ReadonlyArray<number | undefined>
  readonly jobs: number
  readonly phases: Readonly<Record<string, number>>
  readonly attempts: number
  readonly elapsedMs: number
  /** Webhook attempts that arrived again under a webhook-id already received (sent again after a kill). */
  readonly webhooksResent: number
}

const token = "nds_chaos-test-token-0123456789abcdefghijklmnopqrstu"
const project = "chaos"
const group = "nodus.dev"
const finalPhases = new Set(["Succeeded", "Failed", "Cancelled"])

/** A small seeded generator (mulberry32): the same seed kills the same servers and draws the same durations. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** A server of the harness: the shards it holds are what its last `cluster:` line says (0 once killed). */
interface Server extends ClusterServer {
  readonly index: number
}

const call = callAs(token)

const alive = (server: Server) => isAlive(server.child)

/** Runs the whole chaos scenario and answers what it found; throws only when the servers cannot be started. */
export const runChaos = async (options: ChaosOptions): Promise<ChaosReport> => {
  const log = options.log ?? (() => {})
  const draw = random(options.seed)
  const dataDir = mkdtempSync(join(tmpdir(), "nodus-chaos-"))
  const servers: Array<Server> = []
  const started = Date.now()

  const spawnServer = async (index: number): Promise<Server> => {
    const file = options.logDir === undefined ? undefined : join(options.logDir, `server-${index}.log`)
    let started = false
    const server = await spawnClusterServer({
      databaseUrl: options.databaseUrl,
      dataDir,
      speed: options.speed,
      token,
      env: { NODUS_WEBHOOK_ALLOW_LOOPBACK: "1" },
      ...(file === undefined ? {} : {
        onOutput: (child, chunk) => {
          if (!started) appendFileSync(file, `--- pid ${child.pid} started ${new Date().toISOString()}\n`)
          started = true
          appendFileSync(file, chunk)
        }
      })
    })
    log(`server ${index} (pid ${server.child.pid}) serves ${server.url}`)
    return Object.assign(server, { index })
  }

  /** Some live server's answer to a call; a server killed meanwhile is skipped. */
  const anyServer = async (method: string, path: string, body?: unknown) => {
    for (let tries = 0;; tries++) {
      const live = servers.filter(alive)
      const server = live[Math.floor(draw() * live.length)]!
      try {
        return await call(server.url, method, path, body)
      } catch (error) {
        if (tries > 20) throw error
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
    }
  }

  const everyShardHeld = () => heldByAll(servers)

  const listJobs = async () =>
    (await anyServer("GET", `/apis/${group}/v1/namespaces/${project}/jobs`)).body?.items as Array<any> | undefined

  /**
   * After a takeover: every Job's status.cost equals what the ledger charged it. A step records its status before it
   * posts (docs/billing.md, "In the server"), so the two are read in a moment without postings between, until they
   * agree (the new owner settles what the old one recorded) or `costsAgreeMs` passed.
   */
  const costsAgree = async (after: string): Promise<Array<string>> => {
    let found: Array<string> = []
    for (
      const deadline = Date.now() + costsAgreeMs;
      Date.now() < deadline;
      await new Promise((resolve) => setTimeout(resolve, 300))
    ) {
      const before = await storedLedger(options.databaseUrl)
      const jobs = (await listJobs()) ?? []
      const ledger = await storedLedger(options.databaseUrl)
      if (ledger.postings.length !== before.postings.length) continue
      found = costMismatches(jobs, ledger)
      if (found.length === 0) return []
    }
    return found.map((mismatch) => `after ${after}: ${mismatch}`)
  }

  const violations: Array<string> = []
  const takeoversMs: Array<number | undefined> = []
  let webhooks: Webhooks | undefined
  const killTimes: Array<number> = []
  try {
    for (let index = 0; index < options.servers; index++) servers.push(await spawnServer(index))
    await eventually("every shard held", everyShardHeld, { timeoutMs: 60_000 })
    const created = await call(servers[0]!.url, "POST", "/api/v1/namespaces", {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: project }
    })
    if (created.status !== 201) throw new Error(`creating the project: ${created.text}`)
    const since = created.body.metadata.resourceVersion as string
    webhooks = await startWebhooks((method, path, body) => call(servers[0]!.url, method, path, body), group, project)

    // Jobs go in through every server, a batch before each kill, so that kills find Jobs at every stage.
    const names = Array.from({ length: options.jobs }, (_, index) => `job-${index}`)
    const batches = options.kills + 1
    let next = 0
    const createBatch = async (count: number) => {
      for (const name of names.slice(next, next + count)) {
        const duration = options.durations[Math.floor(draw() * options.durations.length)]!
        const body = {
          apiVersion: `${group}/v1`,
          kind: "Job",
          metadata: { name, annotations: { "sim.nodus.dev/duration": duration } },
          spec: {
            image: "python:3.12",
            ...(options.completions === undefined
              ? {}
              : { completions: options.completions, parallelism: options.completions })
          }
        }
        const reply = await anyServer("POST", `/apis/${group}/v1/namespaces/${project}/jobs`, body)
        // A create whose server died after committing answers nothing: it is there, or it is made again.
        if (reply.status !== 201 && reply.status !== 409) {
          violations.push(`creating ${name}: ${reply.status} ${reply.text}`)
        }
      }
      next += count
    }

    for (let kill = 0; kill < options.kills; kill++) {
      await createBatch(Math.ceil((options.jobs - next) / (batches - kill)))
      await new Promise((resolve) => setTimeout(resolve, options.killEveryMs))
      const victim = servers[Math.floor(draw() * servers.length)]!
      const [killedAt, held] = [Date.now(), victim.holds]
      victim.child.kill("SIGKILL")
      killTimes.push(killedAt)
      await new Promise((resolve) => victim.child.once("exit", resolve))
      log(`killed server ${victim.index} (held ${held} shards)`)
      try {
        await eventually("the other servers hold every shard", everyShardHeld, { timeoutMs: 60_000 })
        takeoversMs.push(Date.now() - killedAt)
        log(`takeover after ${Date.now() - killedAt} ms`)
        violations.push(...await costsAgree(`the takeover of kill ${kill + 1}`))
      } catch {
        takeoversMs.push(undefined)
        violations.push(`kill ${kill + 1}: the other servers did not hold every shard within 60 s`)
      }
      servers[victim.index] = await spawnServer(victim.index)
      // The restarted server takes its share back: a takeover too.
      await eventually("the restarted server holds shards", () => servers[victim.index]!.holds > 0, {
        timeoutMs: 20_000
      }).catch(() => log(`server ${victim.index} took no shard back within 20 s`))
      violations.push(...await costsAgree(`the restart of kill ${kill + 1}`))
    }
    await createBatch(options.jobs - next)

    // Every Job reaches a final phase.
    const deadline = started + options.deadlineMs
    let jobs: Array<any> = []
    while (Date.now() < deadline) {
      jobs = (await listJobs()) ?? []
      if (jobs.length === names.length && jobs.every((job) => finalPhases.has(job.status?.phase))) break
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    const unfinished = jobs.filter((job) => !finalPhases.has(job.status?.phase))
    if (jobs.length !== names.length) violations.push(`${jobs.length} Jobs stored of ${names.length} created`)
    if (unfinished.length > 0) {
      violations.push(
        `${unfinished.length} Jobs not final by the deadline: ${
          unfinished.slice(0, 5).map((job) => `${job.metadata.name} ${job.status?.phase}`).join(", ")
        }`
      )
    }
    const elapsedMs = Date.now() - started
    // Every final event is delivered, whichever server sends (the sender is a singleton that moves with the kills).
    while (Date.now() < deadline + 30_000 && missingFinalEvents(jobs, webhooks).length > 0) {
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    // A little longer: the hosts' teardowns are charged after the Jobs finish, and a flip back (two owners, two clocks)
    // would show in the change log.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    jobs = (await listJobs()) ?? jobs

    const history = await changeLog(servers.filter(alive)[0]!.url, since)
    const attempts = (await anyServer("GET", `/apis/${group}/v1/namespaces/${project}/attempts`)).body.items as Array<
      any
    >
    const events = (await anyServer("GET", `/api/v1/namespaces/${project}/events`)).body.items as Array<any>
    const ledger = await storedLedger(options.databaseUrl)
    if (options.dumpTo !== undefined) {
      const holds = [...ledger.holds.values()]
      writeFileSync(
        options.dumpTo,
        JSON.stringify(
          { jobs, attempts, events, history, holds, postings: ledger.postings },
          (_, value) => (typeof value === "bigint" ? String(value) : value),
          1
        )
      )
    }
    violations.push(
      ...checkPhases(jobs, history),
      ...checkAttempts(jobs, attempts, history),
      ...checkMoney(jobs, attempts, ledger),
      ...checkEvents(jobs, events, history)
    )
    violations.push(...checkDeliveries(jobs, webhooks, killTimes))
    const [rotateOn, replayOn] = servers.filter(alive)
    const through = (server: Server | undefined) => (method: string, path: string, body?: unknown) =>
      call((server ?? servers[0]!).url, method, path, body)
    violations.push(...await checkReplayAfterRotation(through(rotateOn), through(replayOn), group, webhooks, 15_000))
    const phases: Record<string, number> = {}
    for (const job of jobs) phases[job.status?.phase ?? "none"] = (phases[job.status?.phase ?? "none"] ?? 0) + 1
    return {
      violations,
      takeoversMs,
      jobs: jobs.length,
      phases,
      attempts: attempts.length,
      elapsedMs,
      webhooksResent: resent(webhooks)
    }
  } finally {
    await webhooks?.receiver.close()
    await Promise.all(
      servers.filter(alive).map((server) =>
        new Promise((resolve) => {
          server.child.once("exit", resolve)
          server.child.kill("SIGKILL")
        })
      )
    )
    await removeTree(dataDir)
  }
}

interface WatchEvent {
  readonly type: string
  readonly object: any
}

/** Every change of Jobs and Attempts after `since`, in order: a watch from there, ended by its timeout. */
const changeLog = async (url: string, since: string): Promise<ReadonlyArray<WatchEvent>> => {
  const read = async (plural: string) => {
    const response = await fetch(
      `${url}/apis/${group}/v1/namespaces/${project}/${plural}?watch=true&resourceVersion=${since}&timeoutSeconds=5`,
      { headers: { authorization: `Bearer ${token}` } }
    )
    const text = await response.text()
    return text.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line) as WatchEvent).filter((
      event
    ) => event.type !== "BOOKMARK")
  }
  const [jobs, attempts] = await Promise.all([read("jobs"), read("attempts")])
  return [...jobs, ...attempts].sort((a, b) =>
    Number(a.object.metadata.resourceVersion) - Number(b.object.metadata.resourceVersion)
  )
}

/** The ledger as the store has it: every stored posting replayed. */
const storedLedger = async (databaseUrl: string) => {
  const runtime = ManagedRuntime.make(Layer.fresh(SqlStore.layerPostgres(databaseUrl)))
  try {
    return Ledger.replay(await runtime.runPromise(Effect.flatMap(Store, (store) => store.postings(0, 10_000_000))))
  } finally {
    await runtime.dispose()
  }
}

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString().slice(11, 23) : "running")

const phasesOf = (history: ReadonlyArray<WatchEvent>, uid: string) =>
  history.filter((event) => event.object.kind === "Job" && event.object.metadata.uid === uid).map((event) =>
    event.object.status?.phase as string | undefined
  )

/** Every Job's stored phase moves into a final phase once, and never out of it. */
export const checkPhases = (jobs: ReadonlyArray<any>, history: ReadonlyArray<WatchEvent>): Array<string> => {
  const found: Array<string> = []
  for (const job of jobs) {
    const phases = phasesOf(history, job.metadata.uid)
    let entered = 0
    for (let index = 0; index < phases.length; index++) {
      const [before, now] = [phases[index - 1], phases[index]]
      if (now !== undefined && finalPhases.has(now) && !(before !== undefined && finalPhases.has(before))) entered++
      if (before !== undefined && finalPhases.has(before) && now !== before) {
        found.push(`${job.metadata.name}: ${before} → ${now} after its final phase`)
      }
    }
    if (finalPhases.has(job.status?.phase) && entered !== 1) {
      found.push(`${job.metadata.name}: entered a final phase ${entered} times`)
    }
  }
  return found
}

/** Each Attempt was created once and no two Attempts of a Job ran one index at once. */
export const checkAttempts = (
  jobs: ReadonlyArray<any>,
  attempts: ReadonlyArray<any>,
  history: ReadonlyArray<WatchEvent>
): Array<string> => {
  const found: Array<string> = []
  const added = new Map<string, number>()
  for (const event of history) {
    if (event.object.kind === "Attempt" && event.type === "ADDED") {
      added.set(event.object.metadata.name, (added.get(event.object.metadata.name) ?? 0) + 1)
    }
  }
  for (const [name, count] of added) if (count > 1) found.push(`Attempt ${name} created ${count} times`)
  for (const job of jobs) {
    const own = attempts.filter((attempt) => attempt.spec?.workload?.uid === job.metadata.uid)
    if (finalPhases.has(job.status?.phase) && job.status?.phase !== "Cancelled" && own.length === 0) {
      found.push(`${job.metadata.name}: ${job.status?.phase} with no Attempt`)
    }
    const byIndex = new Map<number, Array<any>>()
    for (const attempt of own) byIndex.set(attempt.spec.index, [...(byIndex.get(attempt.spec.index) ?? []), attempt])
    for (const [index, runs] of byIndex) {
      const spans = runs.map((run) => ({
        name: run.metadata.name,
        from: Date.parse(run.status.startTime),
        to: run.status.endTime === undefined ? Infinity : Date.parse(run.status.endTime)
      })).sort((a, b) => a.from - b.from)
      for (let at = 1; at < spans.length; at++) {
        const [earlier, later] = [spans[at - 1]!, spans[at]!]
        if (later.from < earlier.to) {
          found.push(
            `${job.metadata.name} index ${index}: ${earlier.name} (${iso(earlier.from)} to ${
              iso(earlier.to)
            }) and ${later.name} (from ${iso(later.from)}) ran at once`
          )
        }
      }
    }
  }
  return found
}

/** How long after a takeover status.cost may differ from the ledger (the new owner's first steps settle them). */
const costsAgreeMs = 20_000

/** The Jobs whose status.cost is not what the ledger charged them. */
export const costMismatches = (jobs: ReadonlyArray<any>, ledger: Ledger): Array<string> =>
  jobs.flatMap((job) => {
    const cost = job.status?.cost
    const charged = ledger.chargesFor(job.metadata.uid).total
    return cost !== undefined && parseMicroUsd(cost.totalUSD) !== charged
      ? [`${job.metadata.name}: status.cost ${cost.totalUSD} USD, the ledger ${charged} micro-USD`]
      : []
  })

/** Per Job: the stored charges are its status.cost, the metered runs of its Attempts, and no hold is open. */
export const checkMoney = (jobs: ReadonlyArray<any>, attempts: ReadonlyArray<any>, ledger: Ledger): Array<string> => {
  const found: Array<string> = [...costMismatches(jobs, ledger)]
  const catalog = new Map(loadCatalog().map((offering) => [offering.id, offering]))
  const variantOf = (offering: string, interruptible: boolean) => {
    const found = catalog.get(offering)
    return found === undefined
      ? undefined
      : variantsOf(found).find((variant) => variant.interruptible === interruptible)
  }
  if (ledger.credits !== ledger.available + ledger.held + ledger.charged - ledger.arrears) {
    found.push("the ledger's identity does not hold")
  }
  /** When each hold (`<uid>/<attempt>`) was released or expired: its host's release, as billing saw it. */
  const released = new Map<string, number>()
  for (const posting of ledger.postings) {
    if ((posting.kind === "Release" || posting.kind === "Expire") && posting.hold !== undefined) {
      released.set(posting.hold, posting.at)
    }
  }
  for (const job of jobs) {
    const uid = job.metadata.uid as string
    const charged = ledger.chargesFor(uid).total
    const open = [...ledger.openHolds].filter((hold) => hold.owner === uid)
    if (finalPhases.has(job.status?.phase) && open.length > 0) {
      found.push(`${job.metadata.name}: ${open.length} holds open after its final phase`)
    }
    if (!finalPhases.has(job.status?.phase)) continue
    // A run is metered from its Attempt (request, boot, end) up to its host's release, which the Attempt does not
    // record: at the latest when its hold was released (the step after the release). So its charge lies between the
    // meter with no teardown and the meter with the longest one; a run charged twice, or not at all, lies outside.
    let least = 0n
    let most = 0n
    for (const attempt of attempts.filter((one) => one.spec?.workload?.uid === uid)) {
      const recorded = factsFromAttempt(attempt as JsonObject, variantOf, 0)
      const releasedAt = released.get(`${uid}/${attempt.metadata.name}`)
      if (recorded === undefined || releasedAt === undefined) {
        found.push(
          `${job.metadata.name}: Attempt ${attempt.metadata.name} cannot be metered (${
            releasedAt === undefined ? "its hold was never released" : JSON.stringify(attempt.status)
          })`
        )
        continue
      }
      const rule = ruleOf(currentPricebook, recorded.variant)
      const latest = Math.max(releasedAt, recorded.releasedAt ?? releasedAt)
      least += meterAttempt(recorded, rule, latest).total
      most += meterAttempt({ ...recorded, releasedAt: latest }, rule, latest).total
    }
    if (charged < least || charged > most) {
      found.push(
        `${job.metadata.name}: its Attempts meter ${least} to ${most} micro-USD, the ledger charged ${charged}`
      )
    }
  }
  return found
}

/**
 * Per Job: its final Event once, and the Event of each phase counted as often as its stored status entered the phase
 * (events commit with the status that causes them: a step fenced out of the store records neither).
 */
export const checkEvents = (
  jobs: ReadonlyArray<any>,
  events: ReadonlyArray<any>,
  history: ReadonlyArray<WatchEvent>
): Array<string> => {
  const found: Array<string> = []
  for (const job of jobs) {
    const uid = job.metadata.uid as string
    const own = events.filter((event) => event.involvedObject?.uid === uid)
    const countOf = (message: string) =>
      own.filter((event) => event.message === message).reduce((sum, event) => sum + (event.count ?? 1), 0)
    if (finalPhases.has(job.status?.phase)) {
      const final = countOf(job.status.message)
      if (final !== 1) {
        found.push(`${job.metadata.name}: its final event ("${job.status.message}") recorded ${final} times`)
      }
    }
    const phases = phasesOf(history, uid)
    const entered = new Map<string, number>()
    for (let index = 0; index < phases.length; index++) {
      const [before, now] = [phases[index - 1], phases[index]]
      if (
        now === undefined || now === before || finalPhases.has(now) || (before === "Recovering" && now === "Running")
      ) continue
      entered.set(now, (entered.get(now) ?? 0) + 1)
    }
    for (const [phase, times] of entered) {
      const recorded = countOf(`The Job is ${phase}.`)
      if (recorded !== times) {
        found.push(`${job.metadata.name}: entered ${phase} ${times} times, its Event counted ${recorded}`)
      }
    }
  }
  return found
}
