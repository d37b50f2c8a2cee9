/**
 * Enrolled hosts as API objects (docs/kinds/Node.md; docs/live.md, "Nodes"): the live driver's view of each enrolled
 * Node written to its Node's status — phase Ready or NotReady, the Ready condition, measured capacity, agent version,
 * last heartbeat (at most every 30 s while nothing else changes) — and what users write to a Node acted on: `cordoned`
 * stops new placements, `drain` also moves running work off (its runs end NodeLost and recover elsewhere), and
 * deleting the Node drains it and refuses its agent from then on.
 *
 * Each Pool object with enrolled Nodes shows their capacity in `status.capacity` {nodes, readyNodes, gpus by model
 * {total, free}} (spec: Pool status), written when a Node of it changes.
 *
 * A Node that goes from Ready to NotReady (its lease lapsed) records pool.node_offline (spec: Event types) in the
 * commit of that status.
 *
 * The local backend's own Node serves every project and belongs to none, so it is no API object (docs/live.md).
 */
import { Effect, Queue } from "effect"
import type { Resources } from "../apiserver/Resources.ts"
import type { LiveCapacity, NodeView } from "../backends/live/LiveCapacity.ts"
import { equals, isObject, type JsonObject } from "../core/Json.ts"
import { timestamp } from "../core/meta/Strategy.ts"
import { refOfKind } from "../kinds/Kinds.ts"
import { deliveredObjectOf, deliveryOf, type EventOutbox } from "../runtime/EventOutbox.ts"
import { followStore, surviving } from "../runtime/Following.ts"
import { statusWriter } from "../runtime/ObjectWriter.ts"
import type { ChangeFeed } from "../store/ChangeFeed.ts"
import type { Change, Store } from "../store/Store.ts"

/** How often a Ready Node's lastHeartbeatTime is written when nothing else changed. */
const heartbeatWriteMs = 30_000

const MiB = 1024 * 1024

/** `since`: when the Node last became Ready or NotReady (the Ready condition's lastTransitionTime). */
export const nodeStatusOf = (view: NodeView, since: number): JsonObject => {
  const { capacity } = view.hello
  const models = [...new Set(capacity.gpus.map((gpu) => gpu.model))]
  const ready = view.ready
  return {
    phase: ready ? "Ready" : "NotReady",
    ...(ready
      ? {}
      : {
        reason: "LeaseExpired",
        message: "The node agent stopped renewing its lease; its runs were recovered elsewhere."
      }),
    conditions: [{
      type: "Ready",
      status: ready ? "True" : "False",
      reason: ready ? "AgentReporting" : "LeaseExpired",
      message: ready ? "The node agent holds its lease." : "The node agent's lease lapsed.",
      lastTransitionTime: timestamp(since)
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

/** spec: Pool status.capacity, from the views of the Pool's Nodes. */
export const poolCapacityOf = (views: ReadonlyArray<NodeView>): JsonObject => {
  const gpus: Record<string, { total: number; free: number }> = {}
  for (const view of views) {
    const models = view.hello.capacity.gpus.map((gpu) => gpu.model)
    let used = view.gpusUsed
    for (const model of models) {
      const entry = (gpus[model] ??= { total: 0, free: 0 })
      entry.total++
      // A Node gives GPUs of its first model (PoolOffering.ts): the ones in use are counted from there.
      if (used > 0) used--
      else if (view.ready) entry.free++
    }
  }
  return { nodes: views.length, readyNodes: views.filter((view) => view.ready).length, gpus }
}

export interface NodeObjectParts {
  readonly capacity: LiveCapacity
  readonly resources: Resources["Service"]
  readonly store: Store["Service"]
  readonly feed: ChangeFeed["Service"]
  readonly outbox: EventOutbox["Service"]
  readonly group: string
  readonly now: () => number
}

/** Keeps Node objects and the live driver in step for the scope's lifetime; `heartbeats` runs on the backend's beat. */
export const followNodes = (parts: NodeObjectParts) =>
  Effect.gen(function*() {
    const { capacity, resources, store, feed } = parts
    const ref = refOfKind(parts.group, "Node")
    const writeStatus = statusWriter(resources)
    /** What was last written of each Node: when, what (heartbeat aside), and since when its readiness holds. */
    const written = new Map<
      string,
      { readonly at: number; readonly text: string; readonly since: number; readonly ready: boolean }
    >()
    const textOf = (view: NodeView) =>
      JSON.stringify([view.ready, view.gpusUsed, view.hello.capacity, view.agentVersion, view.cordoned])

    const poolRef = refOfKind(parts.group, "Pool")

    /** The Pool's status.capacity, when the Pool object exists; the rest of its status is kept. */
    const writePool = (namespace: string, pool: string) =>
      Effect.gen(function*() {
        const views = capacity.nodeViews().filter((view) => view.namespace === namespace && view.pool === pool)
        const found = yield* Effect.result(resources.get(poolRef, namespace, pool))
        if (found._tag === "Failure") return
        const current = isObject(found.success.status) ? found.success.status : {}
        const next = poolCapacityOf(views)
        if (equals(current["capacity"] ?? null, next)) return
        const target = {
          ref: poolRef,
          namespace,
          name: pool,
          uid: found.success.metadata.uid,
          resourceVersion: found.success.metadata.resourceVersion
        }
        yield* writeStatus(target, { ...current, capacity: next })
      })

    /** The pool.node_offline event of a Node that stopped renewing its lease (none when its object is gone). */
    const offlineEvent = (view: NodeView, status: JsonObject, at: number) =>
      Effect.gen(function*() {
        const found = yield* Effect.result(resources.get(ref, view.namespace, view.name))
        if (found._tag === "Failure") return []
        const message =
          `Node ${view.name} of Pool ${view.pool} stopped renewing its lease; its runs are recovered elsewhere.`
        return [
          parts.outbox.record(
            deliveryOf(
              "pool.node_offline",
              at,
              { reason: "NodeOffline", message },
              deliveredObjectOf({ ...found.success, status })
            )
          )
        ]
      })

    /** A Node's status, when what it shows changed or its heartbeat is due (a run starting on it changes nothing). */
    const write = (view: NodeView) =>
      surviving("nodes", `writing the status of Node ${view.key}`)(Effect.gen(function*() {
        if (view.namespace === undefined) return
        const now = parts.now()
        const last = written.get(view.key)
        const text = textOf(view)
        if (last !== undefined && last.text === text && now - last.at < heartbeatWriteMs) return
        const since = last !== undefined && last.ready === view.ready ? last.since : now
        written.set(view.key, { at: now, text, since, ready: view.ready })
        const status = nodeStatusOf(view, since)
        const offline = last?.ready === true && !view.ready ? yield* offlineEvent(view, status, now) : []
        yield* writeStatus(
          { ref, namespace: view.namespace, name: view.name, uid: undefined, resourceVersion: undefined },
          status,
          () => offline
        )
        yield* writePool(view.namespace, view.pool)
      }))

    // The driver's changes are written in order, one at a time, off its call stack.
    const views = yield* Queue.unbounded<NodeView>()
    const unsubscribe = capacity.onNode((node) => {
      if (!("removed" in node)) Queue.offerUnsafe(views, node)
    })
    yield* Effect.addFinalizer(() => Effect.sync(unsubscribe))
    yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(views), write)))

    /** Heartbeats (and any change not told yet), written now and then. */
    const heartbeats = Effect.suspend(() => Effect.forEach(capacity.nodeViews(), write, { discard: true }))

    /** A user's write to a Node: cordon, drain, delete. */
    const onChange = (change: Change) =>
      Effect.sync(() => {
        if (change.key.resource !== ref.info.plural) return
        const key = `${change.key.namespace}/${change.key.name}`
        if (change.type === "DELETED" || change.object.metadata.deletionTimestamp !== undefined) {
          return capacity.remove(key)
        }
        const spec = isObject(change.object.spec) ? change.object.spec : {}
        capacity.cordon(key, spec["cordoned"] === true || spec["drain"] === true)
        if (spec["drain"] === true) capacity.drain(key)
      })
    const resync = Effect.gen(function*() {
      const page = yield* store.list({ resource: ref.info.plural }).pipe(Effect.orElseSucceed(() => ({ items: [] })))
      for (const object of page.items) {
        yield* onChange(
          {
            type: "MODIFIED",
            key: { resource: ref.info.plural, namespace: object.metadata.namespace ?? "", name: object.metadata.name },
            object
          } as Change
        )
      }
    })
    yield* followStore("nodes", feed, resync, onChange)
    return { heartbeats }
  })
