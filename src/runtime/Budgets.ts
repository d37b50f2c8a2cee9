/**
 * Budgets in the server (docs/billing.md, "Budgets"; spec: Events budget.threshold and budget.exceeded). The service
 * keeps in memory what a hold must fit: every Budget (following the change feed) and the project and labels of every
 * ledger owner, so `roomsFor` answers synchronously and exactly inside the simulator's engine step and under the
 * ledger's lock. Owners are also stored (a record per owner), because a deleted Job's charges still count against
 * its Budgets' period.
 *
 * This module holds the snapshot, `roomsFor`, `registerOwner` and `refused` (budget.exceeded); the loop that writes
 * Budgets' statuses is BudgetStatus.ts, apart, because the estimates (which Resources calls) read rooms from here and
 * this module must not need Resources.
 */
import { Clock, Context, Effect, Layer, Queue, Result, Semaphore } from "effect"
import type { Room } from "../core/billing/Billing.ts"
import {
  type BudgetOwner,
  type BudgetRule,
  matches,
  type Period,
  periodOf,
  roomOf,
  ruleOf,
  type Usage,
  usageOf
} from "../core/billing/Budgets.ts"
import type { Ledger } from "../core/billing/Ledger.ts"
import { equals, isObject, type Json, type JsonObject } from "../core/Json.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import type { ResourceObject } from "../core/meta/ObjectMeta.ts"
import { formatMicroUsd } from "../core/Money.ts"
import { iso } from "../core/StatusText.ts"
import { budgetStatusOf } from "../kinds/budget/BudgetStatus.ts"
import { ChangeFeed } from "../store/ChangeFeed.ts"
import { type Change, Store, type WriteOp } from "../store/Store.ts"
import { deliveredObjectOf, deliveryOf, EventOutbox, type OutboxEvent } from "./EventOutbox.ts"
import { followStore } from "./Following.ts"
import { LedgerService } from "./LedgerService.ts"

/** An object the ledger charges and holds for (its uid is the owner), as Budgets match it. */
export interface LedgerOwner extends BudgetOwner {
  readonly uid: string
  readonly name: string
  readonly kind: string
}

/** The object a Budget refused a new run of. */
export interface RefusedObject {
  readonly kind: string
  readonly namespace: string | undefined
  readonly name: string
}

/** Writes a Budget's status; answers the object as stored. */
/** Writes a Budget's status, committing `ops` (its events' outbox records) in the same commit. */
export type BudgetStatusWriter = (
  budget: ResourceObject,
  status: JsonObject,
  ops: ReadonlyArray<WriteOp>
) => Effect.Effect<ResourceObject, ApiError>

export interface BudgetServiceShape {
  /**
   * The rooms of the Refuse Budgets matching the owner now, read from `ledger` (synchronous; Notify Budgets limit
   * nothing).
   */
  readonly roomsFor: (ledger: Ledger, owner: BudgetOwner, now: number) => ReadonlyArray<Room>
  /**
   * Records an owner's project and labels, in memory and in the store (again when they change). Call it before the
   * owner's first hold: a Budget counts the charges and holds of the owners it knows.
   */
  readonly registerOwner: (owner: LedgerOwner) => Effect.Effect<void, ApiError>
  /** A Budget refused a new run of `object`: budget.exceeded, once per Budget, object and period. */
  readonly refused: (budget: string, object: RefusedObject, message: string) => Effect.Effect<void>
  /** Writes the status of every Budget whose status changed, and records the thresholds crossed (the status loop). */
  readonly reconcile: (write: BudgetStatusWriter) => Effect.Effect<void>
  /** Waits until a Budget changes (for the status loop). */
  readonly changed: Effect.Effect<void>
  /** A count of Budget changes so far: work held back by a Budget looks again when it moves (the sim backend). */
  readonly generation: () => number
}

/** The store table of ledger owners (one record per owner uid). */
export const ownersTable = "billing_owners"

/** `source.component` and field manager of the status writes. */
export const budgetComponent = "nodus-budgets"

const ownersPage = 1_000

export class BudgetService extends Context.Service<BudgetService, BudgetServiceShape>()("nodus/runtime/Budgets") {
  /** The snapshot and the calls billing makes (needs Store, ChangeFeed, LedgerService, EventOutbox). */
  static readonly layer = Layer.effect(BudgetService, make())
}

// ---------------------------------------------------------------------------------------------------------------------
// The snapshot

interface Entry {
  readonly object: ResourceObject
  /** undefined: a spec this server cannot read; the Budget limits nothing. */
  readonly rule: BudgetRule | undefined
  /** The uids of the owners it matches. */
  readonly owners: Set<string>
  /** The usage last read, and from which ledger state and period. */
  memo: { readonly ledger: Ledger; readonly seq: number; readonly start: number; readonly usage: Usage } | undefined
  /** budget.exceeded already recorded this period (`refusedKey`), and for which period. */
  refusedIn: { readonly start: number; readonly keys: Set<string> } | undefined
}

export const budgetsResource = "budgets"

const ownerOf = (uid: string, value: Json): LedgerOwner | undefined => {
  if (
    !isObject(value) || typeof value["namespace"] !== "string" || typeof value["name"] !== "string" ||
    typeof value["kind"] !== "string"
  ) return undefined
  const labels = isObject(value["labels"]) ? value["labels"] : {}
  return {
    uid,
    namespace: value["namespace"],
    name: value["name"],
    kind: value["kind"],
    labels: Object.fromEntries(
      Object.entries(labels).filter((entry): entry is [string, string] => typeof entry[1] === "string")
    )
  }
}

const sameOwner = (a: LedgerOwner, b: LedgerOwner): boolean =>
  a.namespace === b.namespace && a.name === b.name && a.kind === b.kind && equals(a.labels, b.labels)

const unavailable = (message: string) =>
  new ApiError({
    code: "Unavailable",
    message: `the ledger owner could not be recorded: ${message}`,
    retryAfterSeconds: 1
  })

const rvOf = (object: ResourceObject): number => Number(object.metadata.resourceVersion)

/** Whether two readings of a Budget's spec limit the same way (a status write leaves the rule as it was). */
const sameRule = (a: BudgetRule | undefined, b: BudgetRule | undefined): boolean =>
  a === undefined || b === undefined
    ? a === b
    : a.amountMicro === b.amountMicro && a.period === b.period && a.createdAt === b.createdAt &&
      a.action === b.action &&
      equals(a.projects, b.projects) && equals(a.labels, b.labels) && equals(a.thresholds, b.thresholds)

/** A delivery-shaped event about a Budget (spec: Delivery; a cluster-scoped object has no namespace). */
const budgetEvent = (budget: ResourceObject, type: string, reason: string, message: string, now: number): OutboxEvent =>
  deliveryOf(type, now, { reason, message }, deliveredObjectOf(budget))

function make() {
  return Effect.gen(function*() {
    const store = yield* Store
    const feed = yield* ChangeFeed
    const ledgerService = yield* LedgerService
    const outbox = yield* EventOutbox
    const budgets = new Map<string, Entry>()
    const owners = new Map<string, LedgerOwner>()
    const changes = yield* Queue.sliding<void>(1)
    /** Counts the Budget changes (a new, changed or deleted Budget): rooms may have grown. */
    let generation = 0
    const passLock = Semaphore.makeUnsafe(1)

    const membersOf = (rule: BudgetRule | undefined): Set<string> => {
      const members = new Set<string>()
      if (rule !== undefined) { for (const owner of owners.values()) if (matches(rule, owner)) members.add(owner.uid) }
      return members
    }

    /**
     * Takes a stored Budget into the snapshot unless what is there is newer. A new Budget or a new spec wakes the
     * status loop; a status write (its own, usually) does not.
     */
    const apply = (object: ResourceObject) => {
      const current = budgets.get(object.metadata.name)
      const same = current !== undefined && current.object.metadata.uid === object.metadata.uid
      if (same && rvOf(current.object) >= rvOf(object)) return
      const rule = ruleOf(object)
      const kept = same && sameRule(current.rule, rule) ? current : undefined
      budgets.set(object.metadata.name, {
        object,
        rule,
        owners: kept?.owners ?? membersOf(rule),
        memo: kept?.memo,
        refusedIn: kept?.refusedIn
      })
      if (kept === undefined || kept.object.metadata.generation !== object.metadata.generation) {
        generation++
        Queue.offerUnsafe(changes, undefined)
      }
    }

    const forget = (object: ResourceObject) => {
      const current = budgets.get(object.metadata.name)
      if (current === undefined || current.object.metadata.uid !== object.metadata.uid) return
      budgets.delete(object.metadata.name)
      generation++
      Queue.offerUnsafe(changes, undefined)
    }

    const onChange = (change: Change) =>
      Effect.sync(() => {
        if (change.key.resource !== budgetsResource) return
        if (change.type === "DELETED") forget(change.object)
        else apply(change.object)
      })

    const resync = Effect.gen(function*() {
      const page = yield* store.list({ resource: budgetsResource })
      const present = new Set(page.items.map((object) => `${object.metadata.name}#${object.metadata.uid}`))
      for (const entry of [...budgets.values()]) {
        if (!present.has(`${entry.object.metadata.name}#${entry.object.metadata.uid}`)) forget(entry.object)
      }
      for (const object of page.items) apply(object)
    })

    const loadOwners = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      let after = ""
      for (;;) {
        const page = yield* store.records(ownersTable, after, ownersPage, now)
        for (const record of page) {
          const owner = ownerOf(record.id, record.value)
          if (owner !== undefined) owners.set(owner.uid, owner)
        }
        if (page.length < ownersPage) break
        after = page[page.length - 1]!.id
      }
    })

    /** What a Budget's owners spent this period and hold now, read again only when the ledger moved. */
    const usageFor = (entry: Entry, ledger: Ledger, period: Period): Usage => {
      const memo = entry.memo
      if (memo !== undefined && memo.ledger === ledger && memo.seq === ledger.lastSeq && memo.start === period.start) {
        return memo.usage
      }
      const usage = usageOf(ledger, entry.owners, period)
      entry.memo = { ledger, seq: ledger.lastSeq, start: period.start, usage }
      return usage
    }

    const roomsFor = (ledger: Ledger, owner: BudgetOwner, now: number): ReadonlyArray<Room> => {
      const rooms: Array<Room> = []
      for (const entry of budgets.values()) {
        const rule = entry.rule
        if (rule === undefined || rule.action !== "Refuse" || !matches(rule, owner)) continue
        const room = roomOf(rule, usageFor(entry, ledger, periodOf(rule, now)))
        if (room !== undefined) rooms.push(room)
      }
      return rooms
    }

    /** Owners known in memory whose record the store has not taken yet (the next registration writes it again). */
    const unsaved = new Set<string>()

    /**
     * The owner counts in memory at once, so this process's Budgets never miss its spending, even if the store fails.
     */
    const remember = (owner: LedgerOwner) => {
      owners.set(owner.uid, owner)
      for (const entry of budgets.values()) {
        const member = entry.rule !== undefined && matches(entry.rule, owner)
        if (member === entry.owners.has(owner.uid)) continue
        if (member) entry.owners.add(owner.uid)
        else entry.owners.delete(owner.uid)
        entry.memo = undefined
      }
    }

    const registerOwner = (owner: LedgerOwner): Effect.Effect<void, ApiError> =>
      Effect.suspend(() => {
        const known = owners.get(owner.uid)
        if (known !== undefined && sameOwner(known, owner) && !unsaved.has(owner.uid)) return Effect.void
        remember(owner)
        unsaved.add(owner.uid)
        const value: JsonObject = {
          namespace: owner.namespace,
          name: owner.name,
          kind: owner.kind,
          labels: { ...owner.labels }
        }
        return store.commit([{ _tag: "PutRecord", table: ownersTable, id: owner.uid, value }]).pipe(
          Effect.mapError((error) => unavailable(error._tag === "StoreError" ? error.message : error.reason)),
          Effect.andThen(Effect.sync(() => unsaved.delete(owner.uid)))
        )
      })

    const refused = (budget: string, object: RefusedObject, message: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        const entry = budgets.get(budget)
        if (entry === undefined || entry.rule === undefined) return
        const now = yield* Clock.currentTimeMillis
        const period = periodOf(entry.rule, now)
        if (entry.refusedIn === undefined || entry.refusedIn.start !== period.start) {
          entry.refusedIn = { start: period.start, keys: new Set() }
        }
        const key = JSON.stringify([object.kind, object.namespace ?? "", object.name])
        if (entry.refusedIn.keys.has(key)) return
        entry.refusedIn.keys.add(key)
        const where = object.namespace === undefined ? object.name : `${object.namespace}/${object.name}`
        // The refusal changes nothing stored: its record is the change (and a lost one only loses the notice).
        const event = budgetEvent(
          entry.object,
          "budget.exceeded",
          "BudgetExceeded",
          `Budget ${budget} refused a new run of ${object.kind} ${where}: ${message}`,
          now
        )
        yield* store.commit([outbox.record(event)]).pipe(
          Effect.catch((error) =>
            Effect.logWarning(
              `budgets: budget.exceeded of ${budget}: ${error._tag === "StoreError" ? error.message : error.reason}`
            )
          )
        )
      })

    /** The statuses that differ from the stored ones, computed under the ledger's lock. */
    const due = (ledger: Ledger, now: number) => {
      const out: Array<
        { readonly entry: Entry; readonly status: JsonObject; readonly crossed: ReadonlyArray<number> }
      > = []
      for (const entry of budgets.values()) {
        if (entry.rule === undefined) continue
        const period = periodOf(entry.rule, now)
        const { status, crossed } = budgetStatusOf({
          rule: entry.rule,
          usage: usageFor(entry, ledger, period),
          period,
          previous: entry.object.status,
          generation: entry.object.metadata.generation,
          now
        })
        if (!equals(status, entry.object.status ?? null)) out.push({ entry, status, crossed })
      }
      return out
    }

    const reconcile = (write: BudgetStatusWriter): Effect.Effect<void> =>
      passLock.withPermit(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const pending = yield* ledgerService.read((ledger) => due(ledger, now))
        for (const { entry, status, crossed } of pending) {
          // budget.threshold is recorded in the commit of the status that first shows the threshold crossed: a restart
          // never repeats one, and a status the store refused announces nothing.
          const rule = entry.rule!
          const shown = { ...entry.object, status }
          const events = crossed.map((percent) => {
            const message = `Budget ${rule.name} crossed ${percent}% of ${
              formatMicroUsd(rule.amountMicro)
            } USD this period: ${String(status["spentUSD"])} USD spent since ${iso(periodOf(rule, now).start)}.`
            return outbox.record(budgetEvent(shown, "budget.threshold", "ThresholdCrossed", message, now))
          })
          const written = yield* Effect.result(write(entry.object, status, events))
          // A Conflict means the Budget changed: the change wakes the loop, which computes again.
          if (Result.isFailure(written)) {
            if (written.failure.code !== "Conflict" && written.failure.code !== "NotFound") {
              yield* Effect.logWarning(
                `budgets: status of Budget ${entry.object.metadata.name}: ${written.failure.message}`
              )
            }
            continue
          }
          apply(written.success)
        }
      }))

    yield* Effect.orDie(loadOwners)
    // The first reading happens before the service answers, so the first hold already sees every Budget.
    yield* Effect.orDie(resync)
    yield* followStore("budgets", feed, resync, onChange)

    return BudgetService.of({
      roomsFor,
      registerOwner,
      refused,
      reconcile,
      changed: Queue.take(changes),
      generation: () => generation
    })
  })
}
