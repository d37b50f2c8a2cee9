/**
 * Runs this server owns that run on another server's host (docs/scale-out.md, "Local hosts"). When a rebalance moves
 * an object's shard here, the server that ran it leaves its healthy run going on its own host (LiveCapacity
 * `handOver`) instead of stopping it; this server adopts it as a remote run: it reads the run's facts from that server
 * every second (their changes wake the reconciler as any run's do), and its release and checkpoint go there. Box calls
 * reach it through BoxForwarding's forward. A run whose host's server stops answering for a lease's length ends
 * NodeLost at the last moment it was known alive; one that server does not know (it was lost there) ends NodeLost at
 * once.
 */
import { Effect, PubSub, Schedule, type Scope, Stream } from "effect"
import type { AttemptFacts, CapacityChange, CapacityPortShape } from "../core/capacity/Capacity.ts"
import { equals, type Json } from "../core/Json.ts"
import type { makeForwarding, PeerFacts } from "./BoxForwarding.ts"

interface RemoteRun {
  readonly owner: string
  facts: AttemptFacts
  /** When its host's server last answered for it. */
  seenAt: number
}

const keyOf = (owner: string, attempt: string) => `${owner}/${attempt}`

/** The facts a peer answered, with this server's copy of the offering. */
const withVariant = (facts: PeerFacts, variant: AttemptFacts["variant"]): AttemptFacts => ({ ...facts, variant })

const lost = (facts: AttemptFacts, at: number): AttemptFacts => ({
  ...facts,
  phase: "Ended",
  outcome: { type: "NodeLost" },
  endedAt: facts.endedAt ?? at,
  stoppingAt: facts.stoppingAt ?? at,
  releasedAt: facts.releasedAt ?? at
})

/** `port` with the runs left on other servers' hosts taken in; the poll runs for the scope's lifetime. */
export const withPeerRuns = (
  port: CapacityPortShape,
  forwarding: ReturnType<typeof makeForwarding>,
  leaseMs: number
): Effect.Effect<CapacityPortShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const remote = new Map<string, RemoteRun>()
    const changes = yield* PubSub.unbounded<CapacityChange>()
    const offeringOf = (run: RemoteRun) => run.facts.variant.offering.id

    /** One poll of a remote run: its facts now, or lost once its host's server stayed silent for a lease. */
    const poll = (run: RemoteRun) =>
      Effect.gen(function*() {
        const now = Date.now()
        const answer = yield* forwarding.peerRun(offeringOf(run), {
          op: "facts",
          owner: run.owner,
          attempt: run.facts.name
        })
        let next: AttemptFacts | undefined
        if (answer === "Unreachable") next = now - run.seenAt > leaseMs ? lost(run.facts, run.seenAt) : undefined
        else if (answer === undefined) next = lost(run.facts, run.seenAt)
        else {
          run.seenAt = now
          next = withVariant(answer, run.facts.variant)
        }
        if (next === undefined || equals(next as unknown as Json, run.facts as unknown as Json)) return
        // An ended run stays known (its last facts) until its owner is forgotten; it is no longer asked after.
        run.facts = next
        yield* PubSub.publish(changes, { _tag: "Attempt", owner: run.owner })
      })
    yield* Effect.forkScoped(Effect.repeat(
      Effect.suspend(() =>
        Effect.forEach([...remote.values()].filter((run) => run.facts.phase !== "Ended"), poll, {
          discard: true,
          concurrency: 4
        })
      ),
      Schedule.spaced("1 second")
    ))

    /** A run the stored Attempt says runs on another server's host: taken in if that server still runs it. */
    const adopt = (owner: string, namespace: string, facts: AttemptFacts): Effect.Effect<AttemptFacts> =>
      Effect.gen(function*() {
        if (!forwarding.isPeer(facts.variant.offering.id)) return yield* port.adopt!(owner, namespace, facts)
        const known = remote.get(keyOf(owner, facts.name))
        if (known !== undefined) return known.facts
        const answer = yield* forwarding.peerRun(facts.variant.offering.id, { op: "facts", owner, attempt: facts.name })
        const now = Date.now()
        // Its host's server is gone, or lost it: its boxes died with it.
        if (answer === "Unreachable" || answer === undefined || answer.phase === "Ended") return lost(facts, now)
        const run: RemoteRun = { owner, facts: withVariant(answer, facts.variant), seenAt: now }
        remote.set(keyOf(owner, facts.name), run)
        yield* Effect.logInfo(
          `local backend: took over run ${owner}/${facts.name}, left running on ${facts.variant.offering.id}`
        )
        return run.facts
      })

    const act = (owner: string, attempt: string, op: "release" | "checkpoint", episode?: number) => {
      const run = remote.get(keyOf(owner, attempt))
      return run === undefined
        ? undefined
        : Effect.asVoid(forwarding.peerRun(offeringOf(run), { op, owner, attempt, episode }))
    }

    return {
      ...port,
      adopt,
      facts: (owner, attempt) => {
        const run = remote.get(keyOf(owner, attempt))
        return run === undefined ? port.facts(owner, attempt) : Effect.succeed({ ...run.facts })
      },
      release: (owner, attempt, keepWarmMs) =>
        act(owner, attempt, "release") ?? port.release(owner, attempt, keepWarmMs),
      checkpoint: (owner, attempt, episode) =>
        act(owner, attempt, "checkpoint", episode) ?? port.checkpoint(owner, attempt, episode),
      forget: (owner) =>
        Effect.andThen(
          Effect.sync(() => {
            for (const [key, run] of remote) if (run.owner === owner) remote.delete(key)
          }),
          port.forget(owner)
        ),
      handOver: (owner) =>
        Effect.andThen(
          Effect.sync(() => {
            for (const [key, run] of remote) if (run.owner === owner) remote.delete(key)
          }),
          port.handOver?.(owner) ?? Effect.void
        ),
      changes: Stream.merge(port.changes, Stream.fromPubSub(changes))
    } satisfies CapacityPortShape
  })
