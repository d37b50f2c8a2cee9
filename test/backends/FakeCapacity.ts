/**
 * A small capacity driver for tests, written apart from the simulator: fixed boot, teardown and warm-start times, no
 * randomness, no failures, its own clock moved by `advance`. Held to the same contract suite as the simulator
 * (FakeCapacity.test.ts), it shows the suite is about the port, not about one driver; the runtime's tests run kinds
 * on it too. A program's work and exit code come from the annotations `fake.nodus.dev/work-ms` and `.../exit-code`.
 */
import { Effect, PubSub, Stream } from "effect"
import type {
  AttemptFacts,
  CapacityChange,
  CapacityPortShape,
  HostRequest,
  Outcome,
  ProgramRequest
} from "../../src/core/capacity/Capacity.ts"
import { type Variant, variantKeyOf } from "../../src/core/capacity/Offering.ts"

export const fakeAnnotation = "fake.nodus.dev/"

export interface FakeOptions {
  readonly hosts: number
  readonly bootMs: number
  readonly teardownMs: number
  readonly warmStartMs: number
  readonly start: number
}

type Facts = { -readonly [K in keyof AttemptFacts]: AttemptFacts[K] }

interface Run {
  readonly facts: Facts
  readonly namespace: string
  /** Bumped whenever the run moves on, so timers of an older stage do nothing. */
  stage: number
  program: ProgramRequest | undefined
  workDone: number
  runningSince: number | undefined
}

export interface FakeCapacity {
  readonly port: CapacityPortShape
  readonly now: () => number
  /** When the driver's next timer is due, if any. */
  readonly nextAt: () => number | undefined
  readonly advance: (ms: number) => void
  /** The changes its port has published so far. */
  readonly published: () => number
}

export const makeFakeCapacity = (options: FakeOptions): Effect.Effect<FakeCapacity> =>
  Effect.map(PubSub.unbounded<CapacityChange>(), (changes) => {
    let now = options.start
    let sequence = 0
    const timers: Array<{ at: number; seq: number; run: () => void }> = []
    const at = (time: number, run: () => void) => timers.push({ at: time, seq: sequence++, run })
    const runs = new Map<string, Map<string, Run>>()
    const used = new Map<string, number>()
    const warm = new Map<string, Array<{ until: number; variant: string }>>()
    const seqs = new Map<string, number>()
    const saved = new Map<string, Map<number, number>>()
    let published = 0
    const publish = (change: CapacityChange) => {
      published++
      PubSub.publishUnsafe(changes, change)
    }
    const told = (owner: string) => publish({ _tag: "Attempt", owner })
    const freed = () => publish({ _tag: "Freed" })

    const warmOf = (namespace: string, variant: Variant) =>
      (warm.get(namespace) ?? []).filter((host) => host.until > now && host.variant === variantKeyOf(variant))
    const free = (variant: Variant) => options.hosts - (used.get(variantKeyOf(variant)) ?? 0)
    const giveBack = (variant: Variant) => {
      used.set(variantKeyOf(variant), (used.get(variantKeyOf(variant)) ?? 1) - 1)
      freed()
    }
    const keepWarm = (namespace: string, variant: Variant, ms: number) => {
      const host = { until: now + ms, variant: variantKeyOf(variant) }
      warm.set(namespace, [...(warm.get(namespace) ?? []), host])
      at(host.until, () => {
        const hosts = warm.get(namespace) ?? []
        if (!hosts.includes(host)) return
        warm.set(namespace, hosts.filter((other) => other !== host))
        giveBack(variant)
      })
    }
    const number = (annotations: Readonly<Record<string, string>>, name: string, fallback: number) => {
      const value = Number(annotations[fakeAnnotation + name])
      return Number.isFinite(value) ? value : fallback
    }
    const worked = (run: Run) => run.workDone + (run.runningSince === undefined ? 0 : now - run.runningSince)
    const save = (owner: string, run: Run) => {
      const seq = (seqs.get(owner) ?? 0) + 1
      seqs.set(owner, seq)
      if (!saved.has(owner)) saved.set(owner, new Map())
      saved.get(owner)!.set(seq, worked(run))
      run.facts.checkpoint = { seq, sizeBytes: 1, at: now }
    }
    const end = (owner: string, run: Run, outcome: Outcome, reusable: boolean) => {
      run.stage++
      run.facts.progressUnits = Math.floor(worked(run) / 1000)
      run.runningSince = undefined
      run.facts.phase = "Ended"
      run.facts.outcome = outcome
      run.facts.endedAt = now
      run.facts.stoppingAt ??= now
      const keepWarmMs = run.program?.keepWarmMs ?? 0
      if (reusable && keepWarmMs > 0) {
        run.facts.releasedAt = now
        keepWarm(run.namespace, run.facts.variant, keepWarmMs)
      } else if (outcome.type === "Stopped") {
        run.facts.releasedAt = now
        giveBack(run.facts.variant)
      } else {
        run.facts.releasedAt = now + options.teardownMs
        at(now + options.teardownMs, () => giveBack(run.facts.variant))
      }
      told(owner)
    }
    const running = (owner: string, run: Run) => {
      const program = run.program!
      run.facts.phase = "Running"
      run.facts.bootedAt = now
      run.runningSince = now
      const stage = ++run.stage
      const remaining = number(program.annotations, "work-ms", 60_000) - run.workDone
      const exitCode = number(program.annotations, "exit-code", 0)
      at(now + Math.max(0, remaining), () => {
        if (run.stage === stage) {
          end(owner, run, exitCode === 0 ? { type: "Succeeded" } : { type: "Failed", exitCode }, true)
        }
      })
      const interval = program.checkpointIntervalMs
      if (interval !== undefined) {
        const tick = (time: number) =>
          at(time, () => {
            if (run.stage !== stage) return
            save(owner, run)
            told(owner)
            tick(time + interval)
          })
        tick(now + interval)
      }
      told(owner)
    }
    const find = (owner: string, attempt: string) => runs.get(owner)?.get(attempt)

    const port: CapacityPortShape = {
      acquire: (request: HostRequest) =>
        Effect.sync(() => {
          const known = find(request.owner, request.attempt)
          if (known !== undefined) return known.facts
          const facts: Facts = {
            name: request.attempt,
            index: request.index,
            number: request.number,
            variant: request.variant,
            warmReuse: false,
            recovery: request.recovery,
            restoreFromSeq: undefined,
            requestedAt: now,
            bootedAt: undefined,
            endedAt: undefined,
            stoppingAt: undefined,
            releasedAt: undefined,
            phase: "Provisioning",
            outcome: undefined,
            checkpoint: undefined,
            checkpointFailures: 0,
            suspend: undefined,
            progressUnits: undefined
          }
          const run: Run = {
            facts,
            namespace: request.namespace,
            stage: 0,
            program: undefined,
            workDone: 0,
            runningSince: undefined
          }
          if (!runs.has(request.owner)) runs.set(request.owner, new Map())
          runs.get(request.owner)!.set(request.attempt, run)
          const warmHost = warmOf(request.namespace, request.variant)[0]
          if (warmHost !== undefined) {
            warm.set(request.namespace, (warm.get(request.namespace) ?? []).filter((host) => host !== warmHost))
            facts.warmReuse = true
          } else if (free(request.variant) > 0) {
            used.set(variantKeyOf(request.variant), (used.get(variantKeyOf(request.variant)) ?? 0) + 1)
          } else {
            Object.assign(facts, {
              phase: "Ended",
              outcome: { type: "Unavailable" },
              endedAt: now,
              stoppingAt: now,
              releasedAt: now
            })
          }
          return facts
        }),
      release: (owner, attempt, keepWarmMs) =>
        Effect.sync(() => {
          const run = find(owner, attempt)
          if (run === undefined || run.facts.phase === "Ended" || run.facts.phase === "Terminating") return
          run.stage++
          if (run.runningSince !== undefined) run.workDone = worked(run)
          run.runningSince = undefined
          run.facts.phase = "Terminating"
          run.facts.stoppingAt = now
          const stage = run.stage
          at(now + options.teardownMs, () => {
            if (run.stage !== stage) return
            run.program = run.program === undefined ? undefined : { ...run.program, keepWarmMs }
            end(owner, run, { type: "Stopped" }, keepWarmMs > 0)
          })
          told(owner)
        }),
      facts: (owner, attempt) => Effect.sync(() => find(owner, attempt)?.facts),
      market: (namespace) => ({
        available: (variant) => Math.max(0, free(variant)) + warmOf(namespace, variant).length,
        bootMs: () => options.bootMs,
        meanTimeBetweenInterruptionsMs: () => undefined
      }),
      forget: (owner) =>
        Effect.sync(() => {
          runs.delete(owner)
          saved.delete(owner)
          seqs.delete(owner)
        }),
      changes: Stream.fromPubSub(changes),
      start: (owner, attempt, program) =>
        Effect.sync(() => {
          const run = find(owner, attempt)
          if (run === undefined || run.program !== undefined || run.facts.phase !== "Provisioning") return
          run.program = program
          run.facts.restoreFromSeq = program.restoreFromSeq
          run.workDone = program.restoreFromSeq !== undefined
            ? saved.get(owner)?.get(program.restoreFromSeq) ?? 0
            : (program.resumeFromUnits ?? 0) * 1000
          const stage = run.stage
          at(now + (run.facts.warmReuse ? options.warmStartMs : options.bootMs), () => {
            if (run.stage === stage) running(owner, run)
          })
        }),
      checkpoint: (owner, attempt, episode) =>
        Effect.sync(() => {
          const run = find(owner, attempt)
          if (run === undefined || run.facts.phase !== "Running") return
          if (run.facts.suspend?.episode === episode && run.facts.suspend.state !== "Failed") return
          run.facts.suspend = { episode, state: "Pending", failures: 0 }
          const stage = run.stage
          at(now + 1_000, () => {
            if (run.stage !== stage) return
            save(owner, run)
            run.facts.suspend = { episode, state: "Saved", failures: 0 }
            told(owner)
          })
        })
    }

    const advance = (ms: number) => {
      const target = now + ms
      for (;;) {
        timers.sort((a, b) => a.at - b.at || a.seq - b.seq)
        const next = timers[0]
        if (next === undefined || next.at > target) break
        timers.shift()
        now = next.at
        next.run()
      }
      now = target
    }
    const nextAt = () =>
      timers.reduce<number | undefined>(
        (earliest, timer) => (earliest === undefined || timer.at < earliest ? timer.at : earliest),
        undefined
      )
    return { port, now: () => now, nextAt, advance, published: () => published }
  })
