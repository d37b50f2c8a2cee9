/**
 * The webhook half of the chaos harness (Chaos.ts, `webhooks: true`; docs/scale-out.md, "Singletons"): one
 * WebhookEndpoint subscribed to the Jobs' final events and a loopback HTTPS receiver (support/WebhookReceiver.ts). The
 * sender is a singleton: whichever server holds it, and however often it moves while servers are killed,
 *
 * - every final event of every Job reaches the receiver, signed with the endpoint's secret;
 * - each event is fanned out once: all its arrivals carry one webhook-id, and an arrival again under a webhook-id
 *   follows a kill that came right after the one before it (the sender died before it recorded the answer: at least
 *   once). Several senders would each send it (one webhook-id, derived from the event's record), with no kill between;
 * - a rotation made through one server and a replay through another: the replay arrives, signed with the new secret.
 */
import type { Received } from "../support/WebhookReceiver.ts"
import { startReceiver } from "../support/WebhookReceiver.ts"

export const endpointName = "chaos-final-events"
const finalTypes = ["job.succeeded", "job.failed", "job.cancelled"]

type Call = (
  method: string,
  path: string,
  body?: unknown
) => Promise<{ readonly status: number; readonly text: string; readonly body: any }>

const endpointPath = (group: string) => `/apis/${group}/v1/webhookendpoints/${endpointName}`

/** Signed at the wall clock's time when sent: checked as the receiver would have checked it when it arrived. */
const signedAt = (got: Received) => new Date(got.at)

export const startWebhooks = async (call: Call, group: string, project: string) => {
  const receiver = await startReceiver()
  const body = {
    apiVersion: `${group}/v1`,
    kind: "WebhookEndpoint",
    metadata: { name: endpointName },
    spec: { url: `https://127.0.0.1:${receiver.port}/final`, eventTypes: finalTypes, projects: [project] }
  }
  const created = await call("POST", `/apis/${group}/v1/webhookendpoints`, body)
  if (created.status !== 201) throw new Error(`creating the WebhookEndpoint: ${created.text}`)
  return { receiver, secret: created.body.status.signingSecret as string }
}

export type Webhooks = Awaited<ReturnType<typeof startWebhooks>>

/** The final events the Jobs' statuses name that have not arrived yet. */
export const missingFinalEvents = (jobs: ReadonlyArray<any>, webhooks: Webhooks) => {
  const arrived = new Set(
    webhooks.receiver.received.map((got) => `${got.json?.data?.object?.metadata?.uid}/${got.json?.type}`)
  )
  return jobs.filter((job) => !arrived.has(`${job.metadata.uid}/job.${String(job.status?.phase).toLowerCase()}`))
}

/** How long before a kill an attempt may have arrived whose answer its killed sender did not record. */
const recordingMs = 2_000

/**
 * Every Job's final event arrived, under one webhook-id, verified; no other delivery of a Job arrived; each arrival
 * again of a webhook-id came after a kill (at `kills`, epoch ms) within `recordingMs` of the arrival before it.
 */
export const checkDeliveries = (
  jobs: ReadonlyArray<any>,
  webhooks: Webhooks,
  kills: ReadonlyArray<number>
): Array<string> => {
  const found: Array<string> = []
  const { receiver, secret } = webhooks
  const lastArrival = new Map<string, number>()
  for (const got of receiver.received) {
    const id = got.headers["webhook-id"]!
    const before = lastArrival.get(id)
    lastArrival.set(id, got.at)
    if (
      before !== undefined && !kills.some((kill) => before <= kill && kill - before <= recordingMs && kill <= got.at)
    ) {
      found.push(
        `${id} (${got.json?.type}) arrived again ${
          got.at - before
        } ms after it had arrived, with no kill of a sender in between`
      )
    }
  }
  const byJob = new Map<string, Array<Received>>()
  for (const got of receiver.received) {
    const uid = String(got.json?.data?.object?.metadata?.uid)
    byJob.set(uid, [...(byJob.get(uid) ?? []), got])
  }
  const unverified = receiver.received.filter((got) => !receiver.verifies(secret, got, signedAt(got)))
  if (unverified.length > 0) found.push(`${unverified.length} deliveries not verified with the endpoint's secret`)
  for (const job of jobs) {
    const arrivals = byJob.get(job.metadata.uid) ?? []
    const expected = `job.${String(job.status?.phase).toLowerCase()}`
    const ids = new Set(arrivals.map((got) => got.headers["webhook-id"]))
    const types = new Set(arrivals.map((got) => got.json?.type))
    if (arrivals.length === 0) found.push(`${job.metadata.name}: its ${expected} never arrived`)
    else if (ids.size !== 1) {
      found.push(
        `${job.metadata.name}: its final event arrived as ${ids.size} deliveries (webhook-ids ${[...ids].join(", ")})`
      )
    }
    if (arrivals.length > 0 && (types.size !== 1 || !types.has(expected))) {
      found.push(`${job.metadata.name}: ${[...types].join(", ")} arrived, ${expected} expected`)
    }
  }
  return found
}

/** Arrivals beyond the first of a webhook-id: attempts made again after their sender was killed (at least once). */
export const resent = (webhooks: Webhooks) =>
  webhooks.receiver.received.length - new Set(webhooks.receiver.received.map((got) => got.headers["webhook-id"])).size

/**
 * A rotation through `rotateOn` and a replay through `replayOn` (two servers, one of which may hold the sender, or
 * neither): the replay arrives, and the rotation's new secret verifies it.
 */
export const checkReplayAfterRotation = async (
  rotateOn: Call,
  replayOn: Call,
  group: string,
  webhooks: Webhooks,
  deadlineMs: number
): Promise<Array<string>> => {
  const path = endpointPath(group)
  const rotated = await rotateOn("POST", `${path}/rotations`, { previousSecretTTL: "1h" })
  if (rotated.status !== 200 && rotated.status !== 201) {
    return [`rotating the secret: ${rotated.status} ${rotated.text}`]
  }
  const secret = rotated.body.status.signingSecret as string
  const log = await replayOn("GET", `${path}/deliveries?limit=1`)
  const first = log.body?.items?.[0]
  if (first === undefined) return [`the delivery log is empty: ${log.text}`]
  const replayed = await replayOn("POST", `${path}/deliveries/${first.id}/replays`)
  if (replayed.status !== 201) return [`replaying ${first.id}: ${replayed.status} ${replayed.text}`]
  const until = Date.now() + deadlineMs
  for (;;) {
    const got = webhooks.receiver.received.find((arrival) => arrival.headers["webhook-id"] === replayed.body.webhookId)
    if (got !== undefined) {
      return webhooks.receiver.verifies(secret, got, signedAt(got))
        ? []
        : ["the replay after the rotation was not signed with the new secret"]
    }
    if (Date.now() > until) {
      return [`the replay of ${first.id} made through another server did not arrive within ${deadlineMs / 1_000} s`]
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
