/**
 * Who waits for capacity, and which idle workers hold some (docs/functions.md, "Yielding to waiting work"): the
 * reconciler records both after each step and hands every step the others' (core/controller/Controller.ts
 * `Contention`). A Function's idle worker beyond what its calls want yields at once to an object that waits for its
 * offering, instead of holding the host through its scaledownWindow; a step that finds no capacity names the idle
 * workers that hold it. One idle worker yields per wait: a wait a worker was stopped for is not offered again until it
 * ends or begins anew.
 */
import type { AttemptFacts } from "../core/capacity/Capacity.ts"
import type { Ranking } from "../core/capacity/Placement.ts"
import type { Action, Contention, ServingLoad } from "../core/controller/Controller.ts"

type Idle = Contention["idle"][number]

interface Wait {
  readonly who: string
  readonly offerings: ReadonlySet<string>
  /** An idle worker of its offerings was stopped since it began: capacity is on its way to it. */
  answered: boolean
}

export class ContentionBook {
  /** Object key → who it is and the offerings it could be placed on, while it waits for capacity. */
  private readonly waiting = new Map<string, Wait>()
  /** Object key → its idle workers after its last step. */
  private readonly idle = new Map<string, ReadonlyArray<Idle>>()

  /** What the step of `key` is told of the others. */
  contentionFor(key: string): Contention {
    const wanted = new Map<string, string>()
    for (const [other, wait] of this.waiting) {
      if (other === key || wait.answered) continue
      for (const offering of wait.offerings) if (!wanted.has(offering)) wanted.set(offering, wait.who)
    }
    const idle = [...this.idle].flatMap(([other, workers]) => other === key ? [] : workers)
    return { wanted, idle }
  }

  /**
   * Records a step's outcome: whether it waits for capacity (of its ranking's offerings), and, for a served object,
   * its workers left idle and the waits its stopped idle workers answer. Answers the keys to step again now: the
   * holders of idle workers an object just began to wait for.
   */
  stepped(key: string, who: string, outcome: {
    readonly waitingForCapacity: boolean
    readonly ranking: Ranking
    readonly facts: ReadonlyArray<AttemptFacts>
    readonly load: ServingLoad | undefined
    readonly actions: ReadonlyArray<Action>
  }): ReadonlyArray<string> {
    if (outcome.load !== undefined) this.served(key, who, outcome.facts, outcome.load, outcome.actions)
    if (!outcome.waitingForCapacity) {
      this.waiting.delete(key)
      return []
    }
    if (this.waiting.has(key)) return []
    const offerings = new Set(outcome.ranking.kept.map((candidate) => candidate.variant.offering.id))
    this.waiting.set(key, { who, offerings, answered: false })
    return [...this.idle].flatMap(([holder, workers]) =>
      holder !== key && workers.some((worker) => offerings.has(worker.offering)) ? [holder] : []
    )
  }

  forget(key: string) {
    this.waiting.delete(key)
    this.idle.delete(key)
  }

  /** Forgets the objects of the shards this process lost. */
  forgetWhere(lost: (key: string) => boolean) {
    for (const key of [...this.waiting.keys(), ...this.idle.keys()]) if (lost(key)) this.forget(key)
  }

  /** A served object's idle workers now, and the first unanswered wait each idle worker it stopped answers. */
  private served(
    key: string,
    who: string,
    facts: ReadonlyArray<AttemptFacts>,
    load: ServingLoad,
    actions: ReadonlyArray<Action>
  ) {
    const stopping = new Set(actions.flatMap((action) => action._tag === "Stop" ? [action.attempt] : []))
    for (const worker of this.idle.get(key) ?? []) {
      if (!stopping.has(worker.attempt)) continue
      const wait = [...this.waiting].find(([other, candidate]) =>
        other !== key && !candidate.answered && candidate.offerings.has(worker.offering)
      )
      if (wait !== undefined) wait[1].answered = true
    }
    const idle = facts
      .filter((worker) =>
        worker.phase === "Running" && (load.running[worker.name] ?? 0) === 0 && !stopping.has(worker.name)
      )
      .map((worker) => ({ attempt: worker.name, offering: worker.variant.offering.id, owner: who }))
    if (idle.length > 0) this.idle.set(key, idle)
    else this.idle.delete(key)
  }
}
