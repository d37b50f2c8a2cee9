/**
 * What a machine's step gathers as it decides (controller/Controller.ts): the next status and its conditions, the
 * actions for the port, the events, the earliest wake-up, and whether it waits for capacity or money. Each kind's step
 * extends it with what it reads of its own object.
 */
import { type Condition, withCondition } from "./Conditions.ts"
import type { Action, ControllerEvent, StepContext, StepResult } from "./Controller.ts"

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const noEvents: ReadonlyArray<ControllerEvent> = []

export class StepState<Status extends { readonly conditions?: ReadonlyArray<Condition> | undefined }> {
  readonly actions: Array<Action> = []
  /** Made at the first event (most steps record none; an array pushed to from empty is made with room for 16). */
  private events: Array<ControllerEvent> | undefined = undefined
  readonly status: Mutable<Status>
  conditions: ReadonlyArray<Condition>
  wakeAt: number | undefined
  /** Work could not be launched for lack of capacity. */
  waitingForCapacity = false
  /** Work could not be launched for lack of money. */
  waitingForFunds = false
  readonly context: StepContext

  constructor(status: Status, context: StepContext) {
    // Written in place when the driver handed it over (StepContext.rewriteStatus). Otherwise copied: Object.assign
    // copies the same keys in the same order as a spread; a spread of statuses of many shapes (fields appear as an
    // object's life goes on) is a megamorphic clone several times as slow, once per step of every object.
    this.status = context.rewriteStatus === true ? (status as Mutable<Status>) : Object.assign({}, status)
    this.conditions = status.conditions ?? []
    this.context = context
  }

  get now() {
    return this.context.now
  }

  wake(at: number) {
    if (this.wakeAt === undefined || at < this.wakeAt) this.wakeAt = at
  }

  event(type: string | undefined, reason: string, message: string, warning = false) {
    const event = { type, reason, message, warning }
    if (this.events === undefined) this.events = [event]
    else this.events.push(event)
  }

  condition(type: string, status: "True" | "False", reason: string, message: string) {
    this.conditions = withCondition(this.conditions, type, status, reason, message, this.now)
  }

  /** The step's result, its conditions written into the status. */
  result(): StepResult<Status> {
    this.status.conditions = this.conditions
    return {
      status: this.status,
      actions: this.actions,
      events: this.events ?? noEvents,
      wakeAt: this.wakeAt,
      waitingForCapacity: this.waitingForCapacity,
      waitingForFunds: this.waitingForFunds
    }
  }
}
