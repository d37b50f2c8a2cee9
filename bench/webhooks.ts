/**
 * Webhook deliveries (runtime/Webhooks.ts) against a loopback HTTPS receiver, beside a bare sign + POST loop to the
 * same receiver in the same run. The server is composed in this process as the tests do (Server.layerWith, plain
 * HTTP, backend none) over `--store` — `pglite` (the default, as `npm start`: embedded PGlite in a temporary
 * directory), `memory`, or `postgres` (the database of `--database-url` / DATABASE_URL, which must be empty: drop and
 * create it first) — with the development switch (loopback receivers) and a resolver stub mapping
 * receiver.example.com to 127.0.0.1, since admission refuses loopback URLs and there is no DNS here.
 *
 * The receiver runs on a worker thread (its own core: a receiver is another machine): HTTPS with a self-signed
 * certificate, answers 200 to everything, stamps each request's arrival when its body has come in, and at the end
 * verifies every request it got with the `standardwebhooks` package (an implementation that is not ours). Times are
 * `performance.timeOrigin + performance.now()` on both threads. One WebhookEndpoint subscribes to job.succeeded; its
 * events are written the way the runtime writes them, one event per commit (`store.commit`), its body carrying its
 * sequence number and creation time: with `--commit event` (the default) the commit holds a core/v1 Event object and
 * the EventOutbox record (`record(deliveryOf(…))`), as ObjectWriter.ts commits a step's event (less the object's
 * status); with `--commit record` the outbox record alone, as Budgets.ts and the ledger's account events commit theirs.
 *
 * 1. paced: `--paced` events (1,000) at `--rate` events/s (200), an open loop (each committed at its due time,
 *    whether or not earlier ones are done). "event → first attempt" is the receiver's arrival of the event's first
 *    attempt minus the moment just before its commit was started (so it includes the commit).
 * 2. burst: `--events` events (2,000) committed as fast as the store takes them (at most 256 commits in flight).
 *    "deliveries/s" is the events delivered divided by the time from the burst's start to the last arrival; the
 *    rate the store took the commits at is shown beside it, and the same latency under the burst.
 * 3. anchor, same receiver, same bodies, same concurrency as the sender (256 attempts in flight, `inFlightMax` in
 *    Webhooks.ts, over a keep-alive agent of 64 sockets as WebhookTransport.ts): each request an HMAC-SHA256
 *    signature (node:crypto, the Standard Webhooks headers) and an HTTPS POST; paced at the same rate and count
 *    (creation → arrival), then a burst of the same count (POSTs/s, from its start to the last arrival).
 *
 * Goals (the issue): ≥ 300 deliveries/s; event → first attempt p99 ≤ 1 s. Anything that fails — a delivery that does
 * not arrive within `--wait` seconds (20) after its phase's last commit, arrives twice (its first attempt failed), or
 * whose record is not Succeeded after one attempt; an anchor answer that is not 2xx; a signature that does not verify
 * — is counted and printed, and the bench exits 1. A goal missed is printed, not a failure.
 *
 *   npm run bench:webhooks -- [--store pglite|memory|postgres] [--database-url postgres://…] [--events 2000]
 *                             [--paced 1000] [--rate 200] [--wait 20] [--commit event|record]
 */
import { createHmac, randomBytes, randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { Agent, createServer, request } from "node:https"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import { Webhook } from "standardwebhooks"
import { createDatabase } from "../test/support/Postgres.ts"
import { argument } from "./Arguments.ts"

const now = () => performance.timeOrigin + performance.now()

/** What the receiver thread tells the main thread. */
type FromReceiver =
  | { readonly _tag: "Listening"; readonly port: number }
  | {
    readonly _tag: "Arrived"
    readonly route: string
    readonly type: string
    readonly seq: number
    readonly webhookId: string
    readonly at: number
  }
  | {
    readonly _tag: "Verified"
    readonly total: number
    readonly verified: number
    readonly problems: ReadonlyArray<string>
  }

type ToReceiver = { readonly _tag: "Verify"; readonly secret: string }

// ---------------------------------------------------------------------------------------------------------------------
// The receiver (worker thread)

const receiver = (material: { readonly cert: string; readonly key: string }) => {
  const port = parentPort!
  const post = (message: FromReceiver) => port.postMessage(message)
  const kept: Array<{ readonly route: string; readonly headers: Record<string, string>; readonly body: string }> = []
  const server = createServer({ cert: material.cert, key: material.key }, (incoming, response) => {
    const chunks: Array<Buffer> = []
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk))
    incoming.on("end", () => {
      const at = now()
      const body = Buffer.concat(chunks).toString("utf8")
      const headers = Object.fromEntries(Object.entries(incoming.headers).map(([name, value]) => [name, String(value)]))
      const route = incoming.url ?? ""
      kept.push({ route, headers, body })
      response.writeHead(200).end()
      let type = ""
      let seq = -1
      try {
        const json = JSON.parse(body) as { type?: string; data?: { object?: { status?: { benchSeq?: number } } } }
        type = json.type ?? ""
        seq = json.data?.object?.status?.benchSeq ?? -1
      } catch {}
      post({ _tag: "Arrived", route, type, seq, webhookId: headers["webhook-id"] ?? "", at })
    })
  })
  // Many connections at once (the sender's and the anchor's 64 each).
  server.maxConnections = 1_024
  server.listen(0, "127.0.0.1", () => post({ _tag: "Listening", port: (server.address() as { port: number }).port }))
  port.on("message", (message: ToReceiver) => {
    const verifier = new Webhook(message.secret)
    const problems: Array<string> = []
    let verified = 0
    for (const got of kept) {
      try {
        verifier.verify(got.body, got.headers)
        verified++
      } catch (error) {
        if (problems.length < 5) {
          problems.push(
            `${got.route} ${got.headers["webhook-id"]}: ${error instanceof Error ? error.message : String(error)}`
          )
        }
      }
    }
    post({ _tag: "Verified", total: kept.length, verified, problems })
  })
}

// ---------------------------------------------------------------------------------------------------------------------
// The bench (main thread)

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!

const latencyLine = (label: string, values: ReadonlyArray<number>, goal = "") => {
  if (values.length === 0) return console.log(`  ${label.padEnd(44)} none arrived`)
  const sorted = [...values].sort((a, b) => a - b)
  const p99 = percentile(sorted, 99)
  console.log(
    `  ${label.padEnd(44)} p50 ${percentile(sorted, 50).toFixed(1).padStart(8)} ms   p99 ${
      p99.toFixed(1).padStart(8)
    } ms   max ${sorted.at(-1)!.toFixed(1).padStart(8)} ms   (n=${values.length})${goal}`
  )
}

const main = async () => {
  // The server's modules are loaded here only, not by the receiver thread.
  const { Effect, Layer, ManagedRuntime } = await import("effect")
  const Server = await import("../src/server/Server.ts")
  const MemoryStore = await import("../src/store/MemoryStore.ts")
  const SqlStore = await import("../src/store/SqlStore.ts")
  const { Store } = await import("../src/store/Store.ts")
  const { defaultFeedOptions } = await import("../src/store/ChangeFeed.ts")
  const { EventOutbox, deliveryOf } = await import("../src/runtime/EventOutbox.ts")
  const { bodyOf, deliveriesTable } = await import("../src/runtime/WebhookLog.ts")
  const { generateTlsMaterial } = await import("../src/apiserver/tls/Certificates.ts")
  const { eventName, eventObject } = await import("../src/core/meta/Events.ts")
  const { eventRef } = await import("../src/core/meta/Kinds.ts")
  type Delivery = import("../src/runtime/WebhookLog.ts").Delivery
  type WriteOp = import("../src/store/Store.ts").WriteOp
  const project = "bench"

  const events = Number(argument("events", "2000"))
  const pacedCount = Number(argument("paced", "1000"))
  const rate = Number(argument("rate", "200"))
  const waitMs = Number(argument("wait", "20")) * 1_000
  const databaseUrl = argument("database-url", process.env["DATABASE_URL"] ?? "")
  const storeKind = argument("store", databaseUrl === "" ? "pglite" : "postgres")
  const commitKind = argument("commit", "event")
  if (commitKind !== "event" && commitKind !== "record") throw new Error(`--commit ${commitKind}: event or record`)
  /** The sender's attempts in flight (Webhooks.ts inFlightMax) and its transport's sockets (WebhookTransport.ts). */
  const inFlight = 256
  const sockets = 64
  const token = "nds_bench-token-0123456789abcdefghijklmnopqrstuvwxyz"

  let failures = 0
  const fail = (what: string) => {
    failures++
    console.error(`FAILURE: ${what}`)
  }

  // The receiver, on its own thread.
  const material = generateTlsMaterial({ hosts: ["127.0.0.1", "receiver.example.com"], now: new Date() })
  const thread = new Worker(new URL(import.meta.url), { workerData: { cert: material.certPem, key: material.keyPem } })
  /** Arrivals per route and sequence number (each a list: a second one is a retry). */
  const arrivals = new Map<string, Map<number, Array<number>>>([["/nodus", new Map()], ["/anchor", new Map()]])
  const arrived = new Map<string, number>([["/nodus", 0], ["/anchor", 0]])
  let pingAt: number | undefined
  let verifiedReply: ((message: Extract<FromReceiver, { _tag: "Verified" }>) => void) | undefined
  const receiverPort = await new Promise<number>((resolve, reject) => {
    thread.on("error", reject)
    thread.on("message", (message: FromReceiver) => {
      if (message._tag === "Listening") resolve(message.port)
      else if (message._tag === "Verified") verifiedReply?.(message)
      else {
        if (message.type === "webhookendpoint.ping") pingAt = message.at
        const routed = arrivals.get(message.route)
        if (routed === undefined || message.seq < 0) return
        arrived.set(message.route, arrived.get(message.route)! + 1)
        const seen = routed.get(message.seq)
        if (seen === undefined) routed.set(message.seq, [message.at])
        else seen.push(message.at)
      }
    })
  })

  // The server, in this process; on PostgreSQL a database of its own (a fresh store: no secrets sealed by another key).
  const database = storeKind === "postgres" && databaseUrl !== "" ? await createDatabase(databaseUrl) : undefined
  const pgliteDir = storeKind === "pglite" ? mkdtempSync(join(tmpdir(), "nodus-bench-webhooks-")) : undefined
  const storeLayer = storeKind === "memory"
    ? Layer.fresh(MemoryStore.layer)
    : storeKind === "pglite"
    ? SqlStore.layerPglite(pgliteDir)
    : storeKind === "postgres"
    ? (database === undefined ? undefined : SqlStore.layerPostgres(database.url))
    : undefined
  if (storeLayer === undefined) throw new Error(`--store ${storeKind}: memory, pglite, or postgres with --database-url`)
  const resolve = async (host: string) => {
    if (host !== "receiver.example.com") throw new Error(`getaddrinfo ENOTFOUND ${host}`)
    return [{ address: "127.0.0.1", family: 4 }]
  }
  let announced: (url: string) => void = () => {}
  const listening = new Promise<string>((done) => (announced = done))
  const runtime = ManagedRuntime.make(Server.layerWith({
    host: "127.0.0.1",
    port: 0,
    apiGroup: "nodus.dev",
    tls: undefined,
    adminToken: token,
    bookmarkInterval: "30 seconds",
    feed: defaultFeedOptions,
    onListening: (url) => announced(url),
    webhooks: { allowLoopback: true, resolve }
  }, storeLayer))
  const run = <A, E>(effect: import("effect").Effect.Effect<A, E, any>): Promise<A> => runtime.runPromise(effect)
  await run(Effect.void)
  const base = await listening
  const { store, outbox } = await run(Effect.gen(function*() {
    return { store: yield* Store, outbox: yield* EventOutbox }
  }))

  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: response.status, json: await response.json() as any }
  }

  const storeName = storeKind === "memory"
    ? "in-memory store"
    : storeKind === "pglite"
    ? `PGlite in ${pgliteDir}`
    : "PostgreSQL"
  console.log(
    `nodus webhooks bench: ${storeName}; ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`
  )
  console.log(
    `each event committed ${
      commitKind === "event"
        ? "with a core/v1 Event object (as ObjectWriter.ts)"
        : "alone, an outbox record without an object change (as Budgets.ts, the ledger's account events)"
    }`
  )
  console.log(
    `receiver: loopback HTTPS on a worker thread, answers 200; paced ${pacedCount} events at ${rate}/s, burst ${events} events; anchor: HMAC-SHA256 + POST, ${inFlight} in flight over ${sockets} keep-alive sockets`
  )

  const endpoints = "/apis/nodus.dev/v1/webhookendpoints"
  const existing = await api("GET", endpoints)
  if (existing.status !== 200) throw new Error(`listing endpoints: ${existing.status} ${JSON.stringify(existing.json)}`)
  if (existing.json.items.length > 0) {
    throw new Error(
      `the store has ${existing.json.items.length} WebhookEndpoints already: give the bench an empty database`
    )
  }
  const namespace = await api("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: project }
  })
  if (namespace.status !== 201) {
    throw new Error(`creating the project: ${namespace.status} ${JSON.stringify(namespace.json)}`)
  }
  const created = await api("POST", endpoints, {
    apiVersion: "nodus.dev/v1",
    kind: "WebhookEndpoint",
    metadata: { name: "bench" },
    spec: { url: `https://receiver.example.com:${receiverPort}/nodus`, eventTypes: ["job.succeeded"] }
  })
  if (created.status !== 201) {
    throw new Error(`creating the endpoint: ${created.status} ${JSON.stringify(created.json)}`)
  }
  const secret: string = created.json.status.signingSecret
  const endpointUid: string = created.json.metadata.uid
  const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))
  const waitFor = async (check: () => boolean, timeoutMs: number) => {
    const deadline = performance.now() + timeoutMs
    while (!check() && performance.now() < deadline) await sleep(5)
    return check()
  }
  if (!(await waitFor(() => pingAt !== undefined, 10_000))) fail("the endpoint's ping did not arrive within 10 s")

  /** An event of a spec type, as a Job's completion records it; its status carries its sequence number and creation. */
  const eventOf = (seq: number, createdAt: number, at = Date.now()) => {
    return deliveryOf("job.succeeded", at, {
      reason: "Succeeded",
      message: `Job bench-${seq} finished: all 1 tasks exited 0.`
    }, {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      metadata: { name: `bench-${seq}`, namespace: project, uid: randomUUID() },
      status: {
        phase: "Succeeded",
        benchSeq: seq,
        benchCreatedAt: createdAt,
        startTime: new Date(at - 60_000).toISOString(),
        completionTime: new Date(at).toISOString(),
        costUSD: "0.012345",
        conditions: [{
          type: "Complete",
          status: "True",
          reason: "Succeeded",
          message: "All tasks exited 0.",
          lastTransitionTime: new Date(at).toISOString()
        }]
      }
    })
  }

  const createdAt = new Map<string, Map<number, number>>([["/nodus", new Map()], ["/anchor", new Map()]])

  /** Runs `fire(seq)` for seq in [from, from + count) at `rate` per second, on time (an open loop). */
  const paced = async (from: number, count: number, fire: (seq: number) => void) => {
    const start = performance.now()
    for (let index = 0; index < count;) {
      const wait = start + (index * 1_000) / rate - performance.now()
      if (wait > 1) await sleep(wait - 1)
      else fire(from + index++)
    }
  }

  /** Runs `send(seq)` for seq in [from, from + count), at most `concurrency` at once. */
  const burst = async (from: number, count: number, concurrency: number, send: (seq: number) => Promise<void>) => {
    let next = from
    await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < from + count) await send(next++)
    }))
  }

  // nodus: one event per commit, as the runtime writes them.
  const pendingCommits = new Set<Promise<void>>()
  const commitEvent = (seq: number): Promise<void> => {
    const at = now()
    createdAt.get("/nodus")!.set(seq, at)
    const event = eventOf(seq, at)
    const involved = {
      apiVersion: "nodus.dev/v1",
      kind: "Job",
      name: `bench-${seq}`,
      namespace: project,
      uid: event.data.object.metadata.uid
    }
    const record = {
      name: eventName(involved.name, Date.parse(event.timestamp), seq),
      involved,
      reason: "Succeeded",
      message: event.data.event.message,
      warning: false,
      count: 1,
      first: Date.parse(event.timestamp),
      last: Date.parse(event.timestamp),
      component: "nodus-runtime"
    }
    // As ObjectWriter.ts commits a step's event (less the Job's status): the core/v1 Event (no owner: there is no Job
    // to collect it with) and the outbox record; or the record alone, as Budgets.ts and the ledger's account events do.
    const object = eventObject(record, randomUUID(), record.last)
    const { ownerReferences: _none, ...metadata } = object.metadata
    const eventOp: WriteOp = {
      _tag: "Create",
      key: { resource: eventRef.info.plural, namespace: project, name: record.name },
      object: { ...object, metadata }
    }
    const done = run(store.commit(commitKind === "event" ? [eventOp, outbox.record(event)] : [outbox.record(event)]))
      .then(
        () => {},
        (error) => fail(`committing event ${seq}: ${error instanceof Error ? error.message : String(error)}`)
      )
    pendingCommits.add(done)
    void done.finally(() => pendingCommits.delete(done))
    return done
  }

  // The anchor: the same body, signed (Standard Webhooks) and POSTed over keep-alive HTTPS, nothing else.
  const anchorAgent = new Agent({ keepAlive: true, maxSockets: sockets })
  const anchorKey = Buffer.from(secret.slice("whsec_".length), "base64")
  const anchorFailures = { count: 0 }
  const anchorPost = (seq: number): Promise<void> => {
    const at = now()
    createdAt.get("/anchor")!.set(seq, at)
    const body = bodyOf(eventOf(seq, at))
    const id = `msg_${randomBytes(16).toString("hex")}`
    const timestamp = Math.floor(Date.now() / 1_000)
    const signature = `v1,${createHmac("sha256", anchorKey).update(`${id}.${timestamp}.${body}`).digest("base64")}`
    return new Promise<void>((done) => {
      const post = request(`https://127.0.0.1:${receiverPort}/anchor`, {
        method: "POST",
        agent: anchorAgent,
        rejectUnauthorized: false,
        headers: {
          "webhook-id": id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signature,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "user-agent": "bench-anchor/1"
        }
      }, (response) => {
        response.resume()
        response.on("end", () => {
          if ((response.statusCode ?? 0) < 200 || (response.statusCode ?? 0) >= 300) {
            anchorFailures.count++
            fail(`anchor POST ${seq}: the receiver answered ${response.statusCode}`)
          }
          done()
        })
      })
      post.on("error", (error) => {
        anchorFailures.count++
        fail(`anchor POST ${seq}: ${error.message}`)
        done()
      })
      post.end(body)
    })
  }

  /** Waits until every seq of [from, from + count) arrived on `route` (or `--wait` passed); the arrivals' latencies. */
  const collect = async (route: string, from: number, count: number) => {
    const routed = arrivals.get(route)!
    const all = () => {
      for (let seq = from; seq < from + count; seq++) if (!routed.has(seq)) return false
      return true
    }
    await waitFor(all, waitMs)
    const latencies: Array<number> = []
    let last = 0
    let missing = 0
    let repeated = 0
    for (let seq = from; seq < from + count; seq++) {
      const seen = routed.get(seq)
      if (seen === undefined) {
        missing++
        continue
      }
      if (seen.length > 1) repeated++
      latencies.push(seen[0]! - createdAt.get(route)!.get(seq)!)
      last = Math.max(last, seen[0]!)
    }
    if (missing > 0) {
      fail(`${route}: ${missing} of ${count} did not arrive within ${waitMs / 1_000} s of the phase's last send`)
    }
    if (repeated > 0) fail(`${route}: ${repeated} of ${count} arrived more than once (a first attempt that failed)`)
    return { latencies, last, missing }
  }

  /** Where the missing nodus deliveries are: outbox records, delivery records made, and their phases. */
  const deliveryRecords = () =>
    run(Effect.gen(function*() {
      const at = Date.now()
      const found: Array<Delivery> = []
      let after = `${endpointUid}/`
      for (;;) {
        const page = yield* store.records(deliveriesTable, after, 1_000, at)
        const mine = page.filter((entry) => entry.id.startsWith(`${endpointUid}/`))
        for (const entry of mine) found.push(entry.value as unknown as Delivery)
        if (page.length < 1_000 || mine.length < page.length) return found
        after = page[page.length - 1]!.id
      }
    }))
  const outboxCount = () =>
    run(
      Effect.map(outbox.read("", 1_000_000, 0), (entries) =>
        entries.filter((entry) => entry.event.type === "job.succeeded").length)
    )
  const diagnose = async (phase: string) => {
    const records = await deliveryRecords()
    const phases = new Map<string, number>()
    for (const delivery of records) phases.set(delivery.phase, (phases.get(delivery.phase) ?? 0) + 1)
    console.error(
      `  ${phase}: job.succeeded outbox records ${await outboxCount()}, delivery records ${
        records.length - 1
      } (+ ping) (${[...phases].map(([name, count]) => `${name} ${count}`).join(", ")}), arrived ${
        arrived.get("/nodus")
      }`
    )
  }

  // 1. Paced.
  await paced(0, pacedCount, (seq) => void commitEvent(seq))
  await Promise.all([...pendingCommits])
  const pacedNodus = await collect("/nodus", 0, pacedCount)
  if (pacedNodus.missing > 0) await diagnose("after the paced phase")

  // 2. Burst.
  const burstStart = now()
  await burst(pacedCount, events, inFlight, commitEvent)
  const committedAt = now()
  const burstNodus = await collect("/nodus", pacedCount, events)
  if (burstNodus.missing > 0) await diagnose("after the burst")

  // Every delivery record: Succeeded at its first attempt, answered 2xx.
  const expected = pacedCount + events + 1
  const records = await (async () => {
    // A record is written just after its answer came: the last ones may lag their arrival a little.
    const deadline = performance.now() + 10_000
    for (;;) {
      const found = await deliveryRecords()
      if (
        found.filter((delivery) => delivery.phase === "Succeeded").length >= expected || performance.now() > deadline
      ) return found
      await sleep(100)
    }
  })()
  if (records.length !== expected) {
    fail(
      `${records.length} delivery records for the endpoint, not ${expected} (${
        pacedCount + events
      } events and the ping)`
    )
  }
  const notSucceeded = records.filter((delivery) =>
    delivery.phase !== "Succeeded" || delivery.attempts !== 1 || (delivery.responseCode ?? 0) < 200 ||
    (delivery.responseCode ?? 0) >= 300
  )
  if (notSucceeded.length > 0) {
    const sample = notSucceeded[0]!
    fail(
      `${notSucceeded.length} deliveries not Succeeded at their first attempt with a 2xx (e.g. ${sample.id}: ${sample.phase}, ${sample.attempts} attempts, ${
        sample.responseCode ?? "no answer"
      }, ${sample.error ?? ""})`
    )
  }

  // 3. The anchor, same counts.
  await paced(0, pacedCount, (seq) => void anchorPost(seq))
  const pacedAnchor = await collect("/anchor", 0, pacedCount)
  const anchorStart = now()
  await burst(pacedCount, events, inFlight, anchorPost)
  const burstAnchor = await collect("/anchor", pacedCount, events)

  // Every request the receiver got, verified by standardwebhooks.
  const verification = await new Promise<Extract<FromReceiver, { _tag: "Verified" }>>((done) => {
    verifiedReply = done
    thread.postMessage({ _tag: "Verify", secret } satisfies ToReceiver)
  })
  if (verification.verified !== verification.total) {
    fail(
      `${verification.total - verification.verified} of ${verification.total} requests did not verify: ${
        verification.problems.join("; ")
      }`
    )
  }

  // Results.
  const perSecond = (count: number, from: number, to: number) => (to > from ? (count / ((to - from) / 1_000)) : 0)
  const nodusRate = perSecond(events - burstNodus.missing, burstStart, burstNodus.last)
  const anchorRate = perSecond(events - burstAnchor.missing, anchorStart, burstAnchor.last)
  const p99 = (
    values: ReadonlyArray<number>
  ) => (values.length === 0 ? Infinity : percentile([...values].sort((a, b) => a - b), 99))
  /** A latency goal is met only when every event arrived: a p99 of the ones that did says nothing of the others. */
  const latencyGoal = (phase: { readonly latencies: ReadonlyArray<number>; readonly missing: number }) =>
    phase.missing === 0 && p99(phase.latencies) <= 1_000
      ? "   goal p99 ≤ 1000: met"
      : `   goal p99 ≤ 1000: MISSED${phase.missing > 0 ? ` (${phase.missing} never arrived)` : ""}`
  const rateLine = (label: string, count: number, phase: { readonly missing: number }, value: number, more = "") =>
    console.log(
      `  ${label.padEnd(44)} ${
        phase.missing > 0 ? `   n/a   (${count - phase.missing} of ${count} arrived)` : value.toFixed(0).padStart(8)
      }${more}`
    )
  if (pacedCount > 0) {
    console.log(
      `\npaced: ${pacedCount} events at ${rate}/s, one per commit (from just before the commit to the receiver's arrival of the first attempt)`
    )
    latencyLine("nodus  event → first attempt", pacedNodus.latencies, latencyGoal(pacedNodus))
    latencyLine("anchor sign + POST → arrival", pacedAnchor.latencies)
  }
  if (events > 0) {
    console.log(
      `\nburst: ${events} events (from the burst's start to the last arrival; ${inFlight} commits / POSTs in flight at most)`
    )
    rateLine(
      "nodus  deliveries/s",
      events,
      burstNodus,
      nodusRate,
      `      (the store took the commits at ${perSecond(events, burstStart, committedAt).toFixed(0)}/s)   ${
        burstNodus.missing === 0 && nodusRate >= 300 ? "goal ≥ 300: met" : "goal ≥ 300: MISSED"
      }`
    )
    rateLine("anchor POSTs/s", events, burstAnchor, anchorRate)
    latencyLine(
      "nodus  event → first attempt, under the burst",
      burstNodus.latencies,
      burstNodus.missing > 0 ? ` (${burstNodus.missing} never arrived)` : ""
    )
    latencyLine("anchor sign + POST → arrival, under the burst", burstAnchor.latencies)
  }
  // Where the time goes, from the delivery records (ms, the service's clock): the event's time → the dispatcher pass
  // that read it (the record's createdAt) → its first attempt signed (results[0]: the pass's commit of the records,
  // then the sender's queue); the rest to the arrival is the transport.
  const jobs = records.filter((delivery) => delivery.type === "job.succeeded" && delivery.results.length > 0)
  console.log(`\nwhere the time goes (delivery records of every phase, wall-clock ms):`)
  latencyLine("nodus  event → read by a dispatcher pass", jobs.map((delivery) => delivery.createdAt - delivery.eventAt))
  latencyLine(
    "nodus  that pass → first attempt signed",
    jobs.map((delivery) => delivery.results[0]![0] - delivery.createdAt)
  )
  console.log(
    `\nreceiver: ${verification.total} requests, ${verification.verified} verified by standardwebhooks; delivery records ${records.length}, Succeeded at the first attempt ${
      records.length - notSucceeded.length
    }; anchor answers not 2xx or lost ${anchorFailures.count}`
  )
  console.log(`failures: ${failures}`)

  await Promise.race([runtime.dispose(), sleep(10_000)])
  await database?.drop()
  await thread.terminate()
  anchorAgent.destroy()
  if (pgliteDir !== undefined) rmSync(pgliteDir, { recursive: true, force: true })
  process.exit(failures === 0 ? 0 : 1)
}

if (isMainThread) await main()
else receiver(workerData as { cert: string; key: string })
