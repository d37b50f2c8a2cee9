/**
 * Enrolled hosts as API objects (docs/kinds/Node.md; docs/live.md, "Nodes"): the live driver's view of each enrolled
 * Node written to its Node's status — phase Ready or NotReady, the Ready condition, measured capacity, agent version,
 * last heartbeat (at most every 30 s while nothing else changes) — and what users write to a Node acted on: `cordoned`
 * stops new placements, `drain` also moves running work off (its runs end NodeLost and recover elsewhere), and
 * deleting the Node drains it and refuses its agent from then on.
 *
 * The local backend's own Node serves every project and belongs to none, so it is no API object (docs/live.md).
 */
import { Effect, Queue } from "effect"
import { isObject, type JsonObject } from "../core/Json.ts"
import { refOfKind } from "../core/meta/Kinds.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import type { LiveCapacity, NodeView } from "../backends/live/LiveCapacity.ts"
import type { Resources } from "../apiserver/Resources.ts"
import { followStore, surviving } from "../runtime/Following.ts"
import { statusWriter } from "../runtime/ObjectWriter.ts"
import type { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change, Store } from "../store/Store.ts"

/** How often a Ready Node's lastHeartbeatTime is written when nothing else changed. */
const heartbeatWriteMs = 30_000

const MiB = 1024 * 1024

export const nodeStatusOf = (view: NodeView, now: number): JsonObject => {
  const { capacity } = view.hello
  const models = [...new Set(capacity.gpus.map((gpu) => gpu.model))]
  const ready = view.ready
  return {
    phase: ready ? "Ready" : "NotReady",
    ...(ready ? {} : { reason: "LeaseExpired", message: "The node agent stopped renewing its lease; its runs were recovered elsewhere." }),
    conditions: [{
      type: "Ready",
      status: ready ? "True" : "False",
      reason: ready ? "AgentReporting" : "LeaseExpired",
      message: ready ? "The node agent holds its lease." : "The node agent's lease lapsed.",
      lastTransitionTime: timestamp(now)
    }],
    capacity: {
      cpu: `${capacity.cpus}`,
      memory: `${Math.floor(capacity.memoryBytes / MiB)}Mi`,
      disk: `${Math.floor(capacity.diskBytes / MiB)}Mi`,
      gpus: capacity.gpus.length,
      ...(models.length === 0 ? {} : { models })
    },
    allocated: { gpus: view.gpusUsed },
    agentVersion: view.agentVersion,
    lastHeartbeatTime: timestamp(view.lastHeartbeat)
  }
}

export interface NodeObjectParts {
  readonly capacity: LiveCapacity
  readonly resources: Resources["Service"]
  readonly store: Store["Service"]
  readonly feed: ChangeFeed["Service"]
  readonly group: string
  readonly now: () => number
}

/** Keeps Node objects and the live driver in step for the scope's lifetime; `heartbeats` runs on the backend's beat. */
export const followNodes = (parts: NodeObjectParts) => Effect.gen(function*() {
  const { capacity, resources, store, feed } = parts
  const ref = refOfKind(parts.group, "Node")
  const writeStatus = statusWriter(resources)
  const written = new Map<string, { readonly at: number; readonly ready: boolean }>()

  const write = (view: NodeView) =>
    surviving("nodes", `writing the status of Node ${view.key}`)(Effect.gen(function*() {
      if (view.namespace === undefined) return
      written.set(view.key, { at: parts.now(), ready: view.ready })
      yield* writeStatus({ ref, namespace: view.namespace, name: view.name, uid: undefined, resourceVersion: undefined }, nodeStatusOf(view, parts.now()))
    }))

  // The driver's changes are written in order, one at a time, off its call stack.
  const views = yield* Queue.unbounded<NodeView>()
  const unsubscribe = capacity.onNode((node) => {
    if (!("removed" in node)) Queue.offerUnsafe(views, node)
  })
  yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
  yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(views), write)))

  /** Heartbeats of Ready Nodes, written now and then. */
  const heartbeats = Effect.suspend(() => Effect.forEach(capacity.nodeViews(), (view) => {
    const last = written.get(view.key)
    return last !== undefined && last.ready === view.ready && parts.now() - last.at < heartbeatWriteMs ? Effect.void : write(view)
  }, { discard: true }))

  /** A user's write to a Node: cordon, drain, delete. */
  const onChange = (change: Change) => Effect.sync(() => {
    if (change.key.resource !== ref.info.plural) return
    const key = `${change.key.namespace}/${change.key.name}`
    if (change.type === "DELETED" || change.object.metadata.deletionTimestamp !== undefined) return capacity.remove(key)
    const spec = isObject(change.object.spec) ? change.object.spec : {}
    capacity.cordon(key, spec["cordoned"] === true || spec["drain"] === true)
    if (spec["drain"] === true) capacity.drain(key)
  })
  const resync = Effect.gen(function*() {
    const page = yield* store.list({ resource: ref.info.plural }).pipe(Effect.orElseSucceed(() => ({ items: [] })))
    for (const object of page.items) yield* onChange({ type: "MODIFIED", key: { resource: ref.info.plural, namespace: object.metadata.namespace ?? "", name: object.metadata.name }, object } as Change)
  })
  yield* followStore("nodes", feed, resync, onChange)
  return { heartbeats }
})
