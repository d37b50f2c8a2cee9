/**
 * When each Node was last known alive, kept in the store (table `nodealive`, by Node key): its last lease renewal,
 * written on the backend's beat once it moved on by `aliveWriteMs`. A server process that was killed leaves the
 * moment it last knew each Node alive; the next one ends the runs lost with them there, so nothing is charged for
 * the time no process watched them (docs/billing.md, "Lost runs"). A mark is at most `aliveWriteMs` behind the
 * renewal it records: a run lost with its Node is charged no later than its Node's last recorded renewal.
 */
import { Effect } from "effect"
import type { LiveCapacity } from "../backends/live/LiveCapacity.ts"
import type { Store, WriteOp } from "../store/Store.ts"

export const aliveTable = "nodealive"

/** How far a Node's renewal moves on before it is written again. */
const aliveWriteMs = 2_000

const pageSize = 1_000

/** The marks a previous process left, handed to the driver (`rememberAlive`): by Node key. */
export const restoreAlive = (capacity: LiveCapacity, store: Store["Service"], now: number) =>
  Effect.gen(function*() {
    const marks = new Map<string, number>()
    for (let after = "";;) {
      const page = yield* store.records(aliveTable, after, pageSize, now).pipe(Effect.orElseSucceed(() => []))
      for (const entry of page) {
        const at = typeof entry.value === "object" && entry.value !== null && !Array.isArray(entry.value)
          ? entry.value["at"]
          : undefined
        if (typeof at !== "number") continue
        marks.set(entry.id, at)
        capacity.rememberAlive(entry.id, at)
      }
      if (page.length < pageSize) return marks
      after = page[page.length - 1]!.id
    }
  })

/** Writes, in one commit, the renewals of Ready Nodes that moved on since they were last written. */
export const aliveRecorder = (
  capacity: LiveCapacity,
  store: Store["Service"],
  restored: ReadonlyMap<string, number>
) => {
  const written = new Map(restored)
  return Effect.suspend(() => {
    const ops: Array<WriteOp> = []
    for (const view of capacity.nodeViews()) {
      if (!view.ready || view.lastHeartbeat - (written.get(view.key) ?? 0) < aliveWriteMs) continue
      written.set(view.key, view.lastHeartbeat)
      ops.push({ _tag: "PutRecord", table: aliveTable, id: view.key, value: { at: view.lastHeartbeat } })
    }
    return ops.length === 0 ? Effect.void : store.commit(ops)
  })
}
