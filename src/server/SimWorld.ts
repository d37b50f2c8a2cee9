/**
 * The simulator as the API server's sim backend holds it (docs/simulator.md, "The sim backend"): one engine, one
 * simulated fleet (the whole catalog, `defaultHostsPerVariant` hosts of every variant, the headless runner's provider
 * defaults) and one Simulation, mirroring the Jobs of the store. Everything here is synchronous, like the engine:
 * after each controller step the world notes what the store must learn (the Job's status, its Attempts, its events),
 * and SimBackend.ts writes that outbox once the engine has run.
 */
import type { Room, Settled as Billed } from "../core/billing/Billing.ts"
import type { AttemptFacts } from "../core/capacity/Capacity.ts"
import { type ControllerEvent } from "../core/controller/Controller.ts"
import { type JobSpecType, type JobStatusType } from "../core/schemas/Job.ts"
import type { Ledger } from "../core/billing/Ledger.ts"
import { isFinalPhase } from "../core/kinds/job/JobPhases.ts"
import { type Offering, type Variant, variantsOf } from "../core/capacity/Offering.ts"
import type { Explanation } from "../core/capacity/Placement.ts"
import type { Pricebook } from "../core/billing/Pricebook.ts"
import { Engine } from "../backends/sim/Engine.ts"
import { Prng } from "../backends/sim/Prng.ts"
import { defaultFleet, providerModelsOf } from "../backends/sim/Run.ts"
import { SimCapacity, type WorkloadModel } from "../backends/sim/SimCapacity.ts"
import { type Launched, type SimBilling, type SimJob, Simulation } from "../backends/sim/Simulation.ts"

/** Hosts of every offering variant in the server's fleet (a scenario's default too). */
export { defaultHostsPerVariant } from "../core/capacity/ProviderModels.ts"

/** The seed of every random draw of the server's simulator: the same requests give the same runs. */
export const defaultSimSeed = "nodus-sim"

/** An Attempt of a mirrored Job, with what was last written of it. */
export interface TrackedAttempt {
  /** The driver's facts: the same object while the run lives, so it is always current. */
  readonly facts: AttemptFacts
  readonly placement: Explanation | undefined
  created: boolean
  /** The JSON of the status last written, and the resourceVersion that write gave the object. */
  written: string | undefined
  resourceVersion: string | undefined
}

/** A Job of the store mirrored into the simulation. */
export interface Tracked {
  readonly key: string
  readonly namespace: string
  readonly name: string
  readonly uid: string
  /** metadata.labels of the stored Job (Budgets match them). */
  labels: Readonly<Record<string, string>>
  readonly job: SimJob
  /** The store's metadata.generation the simulation has seen (the simulation counts its own). */
  generation: number
  /** The JSON of the status last written, and the resourceVersion that write gave the Job. */
  written: string | undefined
  resourceVersion: string | undefined
  /**
   * A Job that had finished under an earlier server process: its status is final and stays as stored (the controller
   * sees it only to delete it after ttlSecondsAfterFinished; what it would re-derive from the recorded runs is no news).
   */
  readonly finishedBefore: boolean
  /** Attempts whose objects may still need a write; ended ones leave once written. */
  readonly attempts: Map<string, TrackedAttempt>
  /** The Events written for this Job by aggregation key (Events.ts), so a repeat only counts up. */
  readonly events: Map<string, { readonly name: string; readonly count: number; readonly first: number }>
}

/** An event of a step, with the time it happened and the Job's status right after. */
export interface PendingEvent {
  readonly tracked: Tracked
  readonly event: ControllerEvent
  readonly at: number
  readonly status: JobStatusType
}

/** A Budget that held a Job back (its run does not fit the Budget's room): budget.exceeded. */
export interface BudgetRefusal {
  readonly tracked: Tracked
  readonly budget: string
  readonly message: string
}

/** What the store has to learn since the last flush, in the order it happened. */
export interface Outbox {
  readonly dirty: Set<Tracked>
  readonly events: Array<PendingEvent>
  readonly refusals: Array<BudgetRefusal>
  /** Jobs the controller deleted (ttlSecondsAfterFinished). */
  readonly deletes: Array<Tracked>
}

const emptyOutbox = (): Outbox => ({ dirty: new Set(), events: [], refusals: [], deletes: [] })

export interface Admission {
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly generation: number
  readonly labels: Readonly<Record<string, string>>
  readonly spec: JobSpecType
  readonly workload: WorkloadModel
  readonly status: JobStatusType
  /** The runs a previous server process recorded; `live` are those still running then, to be rewritten as ended. */
  readonly attempts: ReadonlyArray<AttemptFacts>
  readonly live: ReadonlyArray<AttemptFacts>
}

export interface WorldOptions {
  readonly start: number
  readonly catalog: ReadonlyArray<Offering>
  readonly hostsPerVariant: number
  readonly seed: string
  /** Bill the runs (docs/billing.md, "In the server"); absent: nothing is billed. */
  readonly billing?: WorldBilling | undefined
}

/**
 * The server's ledger as the world bills on it. The engine only runs while the ledger service lends its ledger
 * (SimBackend.ts), and the service may rebuild it from the store after a failed commit, so the world asks for the
 * current one each time instead of keeping one.
 */
export interface WorldBilling {
  readonly ledger: () => Ledger
  readonly pricebook: Pricebook
  /** The rooms of the Budgets matching a Job now. */
  readonly rooms?: (tracked: Tracked, ledger: Ledger, now: number) => ReadonlyArray<Room>
}

// The server keeps no trace: its history is the store's objects and events.
const noTrace = { record: () => {} }

/**
 * The Budget that holds the Job back after this step, if one does: its next run does not fit the Budget's room (Funded
 * False BudgetExceeded), or its running work must stop because the Budget's room ran out.
 */
const budgetRefusalOf = (job: SimJob, billed: Billed | undefined): { readonly budget: string; readonly message: string } | undefined => {
  const funding = billed?.funding
  if (funding === undefined) return undefined
  if (funding.stop?.budget !== undefined) return { budget: funding.stop.budget, message: funding.stop.message }
  const funded = job.status.conditions?.find((condition) => condition.type === "Funded")
  const blocked = funding.blocked
  if (funded?.status === "False" && funded.reason === "BudgetExceeded" && blocked?.budget !== undefined) return { budget: blocked.budget, message: blocked.message }
  return undefined
}

/** The simulation's billing over the server's ledger, asking for it anew at every use. */
const billingOf = (billing: WorldBilling | undefined, trackedOf: (job: SimJob) => Tracked | undefined, now: () => number): SimBilling | undefined => {
  if (billing === undefined) return undefined
  const rooms = billing.rooms
  return {
    get ledger() {
      return billing.ledger()
    },
    pricebook: billing.pricebook,
    rooms: (job) => {
      const tracked = trackedOf(job)
      return tracked === undefined || rooms === undefined ? [] : rooms(tracked, billing.ledger(), now())
    }
  }
}

export class SimWorld {
  readonly engine: Engine
  readonly capacity: SimCapacity
  readonly simulation: Simulation
  readonly catalog: ReadonlyArray<Offering>
  readonly tracked = new Map<string, Tracked>()
  /**
   * Uids of Jobs the world let go of (deleted by their controller, or found gone from the store) whose deletion the
   * change feed has not delivered yet: changes about them still queued in the feed are stale, not new Jobs.
   */
  readonly gone = new Set<string>()
  private readonly byJob = new WeakMap<SimJob, Tracked>()
  private readonly offerings: ReadonlyMap<string, Offering>
  private outbox: Outbox = emptyOutbox()

  constructor(options: WorldOptions) {
    this.catalog = options.catalog
    this.offerings = new Map(options.catalog.map((offering) => [offering.id, offering]))
    this.engine = new Engine(options.start)
    this.capacity = new SimCapacity(this.engine, new Prng(options.seed).derive("capacity"), providerModelsOf(defaultFleet(options.hostsPerVariant)))
    this.simulation = new Simulation({
      engine: this.engine,
      capacity: this.capacity,
      catalog: options.catalog,
      trace: noTrace,
      billing: billingOf(options.billing, (job) => this.byJob.get(job), () => this.engine.now),
      onStep: (job, result, launched, billed) => this.stepped(job, result.events, launched, billed),
      onDeleted: (job) => this.deleted(job)
    })
  }

  /** Mirrors a Job of the store; the simulation reconciles it when the engine next runs. */
  admit(admission: Admission): Tracked {
    const { namespace, name, uid } = admission
    const job = this.simulation.submit(namespace, name, admission.spec, admission.workload, {
      uid,
      generation: admission.generation,
      status: admission.status,
      attempts: admission.attempts
    })
    const finishedBefore = admission.status.phase !== undefined && isFinalPhase(admission.status.phase)
    const tracked: Tracked = { key: `${namespace}/${name}`, namespace, name, uid, labels: admission.labels, job, generation: admission.generation, written: undefined, resourceVersion: undefined, finishedBefore, attempts: new Map(), events: new Map() }
    for (const facts of admission.live) tracked.attempts.set(facts.name, { facts, placement: undefined, created: true, written: undefined, resourceVersion: undefined })
    this.tracked.set(tracked.key, tracked)
    this.byJob.set(job, tracked)
    if (admission.live.length > 0) this.outbox.dirty.add(tracked)
    return tracked
  }

  /** A new spec generation of a mirrored Job (spec.state, parallelism, ...). */
  update(tracked: Tracked, spec: JobSpecType, generation: number): void {
    this.simulation.update(tracked.job, spec)
    // The core reports observedGeneration from the simulation's count: keep it the store's.
    tracked.job.generation = generation
    tracked.generation = generation
  }

  /** Forgets a Job the store no longer has; its hosts go back to the pool. */
  remove(tracked: Tracked): void {
    this.simulation.remove(tracked.job)
    this.gone.add(tracked.uid)
    if (this.tracked.get(tracked.key) === tracked) this.tracked.delete(tracked.key)
  }

  /** Hands over what the store has to learn, and starts a new outbox. */
  take(): Outbox {
    const outbox = this.outbox
    this.outbox = emptyOutbox()
    return outbox
  }

  get pending(): boolean {
    return this.outbox.dirty.size > 0 || this.outbox.events.length > 0 || this.outbox.refusals.length > 0 || this.outbox.deletes.length > 0
  }

  variantOf(offering: string, interruptible: boolean): Variant | undefined {
    const found = this.offerings.get(offering)
    return found === undefined ? undefined : variantsOf(found).find((variant) => variant.interruptible === interruptible)
  }

  /** Whether some variant of the offering has a free host now. */
  available(offering: Offering): boolean {
    return variantsOf(offering).some((variant) => this.capacity.available(variant, "") > 0)
  }

  private stepped(job: SimJob, events: ReadonlyArray<ControllerEvent>, launched: ReadonlyArray<Launched>, billed: Billed | undefined): void {
    const tracked = this.byJob.get(job)
    if (tracked === undefined) return
    const refusal = budgetRefusalOf(job, billed)
    if (refusal !== undefined) this.outbox.refusals.push({ tracked, ...refusal })
    for (const { action, facts } of launched) {
      // A launch that found its capacity taken never ran: it is no run of capacity, so no Attempt records it.
      if (facts.outcome?.type === "Unavailable") continue
      tracked.attempts.set(facts.name, { facts, placement: action.explain(), created: false, written: undefined, resourceVersion: undefined })
    }
    this.outbox.dirty.add(tracked)
    const at = this.engine.now
    for (const event of events) this.outbox.events.push({ tracked, event, at, status: job.status })
  }

  private deleted(job: SimJob): void {
    const tracked = this.byJob.get(job)
    if (tracked === undefined) return
    if (this.tracked.get(tracked.key) === tracked) this.tracked.delete(tracked.key)
    this.gone.add(tracked.uid)
    this.outbox.deletes.push(tracked)
  }
}
