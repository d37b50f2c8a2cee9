/**
 * The server's ledger (docs/billing.md): the core's Ledger, rebuilt from the store's postings when the server starts,
 * and every operation's postings committed to the store before the operation answers. One server process owns the
 * ledger of its store (the same rule as the sim backend: docs/simulator.md); operations are serialized by a lock, so
 * the ledger's seqs follow the store's. An operation and its commit are one uninterruptible step (a client that hangs
 * up must not leave postings applied in memory but never stored). A commit the store refuses (another process posted
 * those seqs first, or the fence is gone) stored nothing: its postings are taken back (`Ledger.undoDrained`). After a
 * commit that fails otherwise the ledger is rebuilt from the store before the next operation; while the store cannot be
 * read, operations fail Unavailable.
 *
 * Starter credits (docs/billing.md, "Starter credits"): the embedded default and sim mode grant them once, under a
 * fixed key, so a new user can run work at once; a production database starts at zero.
 *
 * Account events (docs/billing.md, "Account events"): billing.low_balance and billing.arrears_posted are recorded in
 * the event outbox, in the commit of the postings whose balances crossed their lines (core/billing/Account.ts).
 */
import { Clock, Context, Effect, Layer, Result, Semaphore } from "effect"
import { type AccountBalances, type AccountEvent, accountEventsOf, balancesOf } from "../core/billing/Account.ts"
import { Ledger, type Posting } from "../core/billing/Ledger.ts"
import { ApiError } from "../core/meta/ApiError.ts"
import { formatMicroUsd } from "../core/Money.ts"
import { type CommitFailed, Store, type StoreError, type WriteOp } from "../store/Store.ts"
import { deliveryOf, EventOutbox, type OutboxEvent } from "./EventOutbox.ts"

/** Starter credits of the embedded default and sim mode: 100 USD (nodus). */
export const starterCreditsMicro = 100_000_000n

const starterKey = "grant/starter"

/** How often an operation on a shared store is made again after another process's posting got there first. */
const racesMax = 4

/** Postings read per page while rebuilding. */
const replayPage = 10_000

export interface LedgerShape {
  /** Reads the ledger (synchronously, under the lock). */
  readonly read: <A>(f: (ledger: Ledger) => A) => Effect.Effect<A>
  /**
   * Runs operations on the ledger and commits their postings; answers what `f` answered. When the commit fails the
   * postings are taken back (or the ledger rebuilt), and the error is Unavailable (nothing was charged). `fence`
   * commits with the postings: a controller's fencing token (runtime/Ownership.ts), so a process that lost an object
   * bills nothing for it.
   */
  readonly update: <A>(f: (ledger: Ledger) => A, fence?: ReadonlyArray<WriteOp>) => Effect.Effect<A, ApiError>
  /**
   * As `update`, with what the postings are for recorded before they are: `record(answer)` runs once `f` is applied
   * (under the lock), and the postings commit after it. A process that stops between the two leaves the ledger behind
   * the records, never ahead of them: the next settle captures what is missing, and no charge outgrows the run it is
   * for (docs/scale-out.md). A record that fails leaves the ledger rebuilt and fails the operation (nothing was
   * charged). Postings the store refuses after the record (another process posted first) are not made again here —
   * the record is made: they are taken back, `posted` is false, and the caller settles again soon. Where
   * `recordFirst` answers no record (the postings must be stored before what the caller does next, as a hold before its
   * capacity starts), the postings commit first, as `update` commits them.
   */
  readonly updateAfter: <A, E>(
    f: (ledger: Ledger) => A,
    fence: ReadonlyArray<WriteOp>,
    recordFirst: (answer: A) => Effect.Effect<void, E> | undefined
  ) => Effect.Effect<{ readonly answer: A; readonly posted: boolean }, ApiError | E>
}

export interface LedgerOptions {
  /** Credits granted once to a new ledger (0: none). */
  readonly starterMicro: bigint
  /** The API group the account events' object names (default nodus.dev). */
  readonly apiGroup?: string
  /**
   * Other server processes post to the same store (docs/scale-out.md): before each read and operation the ledger takes
   * in what they posted since, so its decisions start from the stored ledger; a commit that still races one fails on
   * its seq, is taken back, and the operation is made again after the others' (a few times, then it fails Unavailable).
   */
  readonly shared?: boolean
}

export class LedgerService extends Context.Service<LedgerService, LedgerShape>()("nodus/runtime/LedgerService") {
  /** The ledger over the store; account events are recorded in the outbox with the postings that caused them. */
  static readonly layer = (options: LedgerOptions) => Layer.effect(LedgerService, make(options))
}

/**
 * The object an account event is about: the organization's account, which is no kind of the API (there is one per
 * server), shown with its balances (docs/billing.md, "Account events").
 */
const accountEvent = (group: string, event: AccountEvent, balances: AccountBalances, at: number): OutboxEvent =>
  deliveryOf(event.type, at, event, {
    apiVersion: `${group}/v1`,
    kind: "Account",
    metadata: { name: "account", uid: "account" },
    status: {
      availableUSD: formatMicroUsd(balances.available),
      heldUSD: formatMicroUsd(balances.held),
      arrearsUSD: formatMicroUsd(balances.arrears)
    }
  })

/** Why a commit failed: the store's message, or the condition the store refused it on (CommitFailed has no message). */
const refusal = (error: StoreError | CommitFailed | { readonly message: string }) =>
  error.message !== ""
    ? error.message
    : "reason" in error
    ? `the store refused the commit (${error.reason} at op ${error.index})`
    : "the store refused the commit"

const unavailable = (error: StoreError | CommitFailed | { readonly message: string }) =>
  new ApiError({
    code: "Unavailable",
    message: `the ledger could not be written: ${refusal(error)}`,
    retryAfterSeconds: 1
  })

/** Applies to `ledger` every stored posting after its last one, page by page. */
const catchUp = (store: Store["Service"], ledger: Ledger) =>
  Effect.gen(function*() {
    for (;;) {
      const page = yield* store.postings(ledger.lastSeq, replayPage)
      ledger.extend(page)
      if (page.length < replayPage) return ledger
    }
  })

/** Every stored posting, into a new ledger at each run. */
const load = (store: Store["Service"]) => Effect.suspend(() => catchUp(store, new Ledger()))

function make(options: LedgerOptions) {
  return Effect.gen(function*() {
    const store = yield* Store
    const outbox = yield* EventOutbox
    const group = options.apiGroup ?? "nodus.dev"
    let ledger = yield* Effect.orDie(load(store))
    /** What is in memory may be ahead of the store: a commit failed, and so did the rebuild after it. */
    let stale = false
    const lock = Semaphore.makeUnsafe(1)

    const rebuild = Effect.map(load(store), (fresh) => {
      ledger = fresh
      stale = false
    })
    /** Catch-ups of a shared ledger (reads of what other processes posted) started, and the latest one finished. */
    let catchUpsStarted = 0
    let catchUpFinished = 0
    /**
     * Under the lock: the ledger rebuilt when it is stale; on a shared store, caught up unless a catch-up that started
     * after the caller asked (`askedAt`: the catch-ups started by then) has finished. Callers waiting on the lock share
     * one read of the store (before, each made its own: one per Job create under load), and each still sees every
     * posting committed before it asked.
     */
    const current = (askedAt: number) =>
      Effect.suspend(() => {
        if (stale) return Effect.mapError(rebuild, unavailable)
        if (options.shared !== true || catchUpFinished > askedAt) return Effect.void
        const index = ++catchUpsStarted
        return Effect.mapError(
          Effect.map(catchUp(store, ledger), () => void (catchUpFinished = Math.max(catchUpFinished, index))),
          unavailable
        )
      })
    /** Runs `use` under the lock, given when its caller asked: the catch-ups started before it waited for the lock. */
    const underLock = <A, E>(use: (askedAt: number) => Effect.Effect<A, E>) =>
      Effect.suspend(() => {
        const askedAt = catchUpsStarted
        return lock.withPermit(use(askedAt))
      })

    /**
     * Commits the postings made since the last commit, and in the same commit the account events their balances crossed
     * into (docs/billing.md, "Account events"): a lost commit loses both.
     */
    const persist = (
      before: AccountBalances,
      fence: ReadonlyArray<WriteOp>,
      postings: ReadonlyArray<Posting> = ledger.drain()
    ) =>
      Effect.gen(function*() {
        if (postings.length === 0) return
        const now = yield* Clock.currentTimeMillis
        const after = balancesOf(ledger)
        const events = accountEventsOf(before, after).map((event) =>
          outbox.record(accountEvent(group, event, after, now))
        )
        yield* store.commit([...postings.map((posting) => ({ _tag: "Post" as const, posting })), ...events, ...fence])
          .pipe(
            Effect.catch((error): Effect.Effect<never, StoreError | CommitFailed> => {
              // Refused whole (another process posted those seqs first, or the fence is gone): nothing was stored, and
              // the postings are taken back. Failed otherwise: what is in memory may not be what was stored.
              if (error._tag === "CommitFailed") {
                return Effect.andThen(Effect.sync(() => ledger.undoDrained()), Effect.fail(error))
              }
              stale = true
              return Effect.andThen(Effect.ignore(rebuild), Effect.fail(error))
            })
          )
      })

    /**
     * Another process posted between this one's catching up and its commit (the seq was taken, or the operation made):
     * on a shared store the operation is made again on the rebuilt ledger, at most `racesMax` times.
     */
    const raced = (error: StoreError | CommitFailed, tries: number) =>
      options.shared === true && tries < racesMax && error._tag === "CommitFailed" &&
      (error.reason === "Conflict" || error.reason === "RecordExists")

    const updateAfter: LedgerShape["updateAfter"] = (f, fence, recordFirst) =>
      underLock((askedAt) => Effect.uninterruptible(operate(f, fence, recordFirst, askedAt)))

    const operate = <A, E>(
      f: (ledger: Ledger) => A,
      fence: ReadonlyArray<WriteOp>,
      recordFirst: (answer: A) => Effect.Effect<void, E> | undefined,
      askedAt: number
    ) =>
      Effect.gen(function*() {
        for (let tries = 1;; tries++) {
          // A race lost means the ledger is behind the store: the next try reads it whatever was read before.
          yield* current(tries === 1 ? askedAt : catchUpsStarted)
          const before = balancesOf(ledger)
          const answer = f(ledger)
          const record = recordFirst(answer)
          if (record === undefined) {
            // Postings first, as `update` makes them (made again on a race).
            const persisted = yield* Effect.result(persist(before, fence))
            if (Result.isSuccess(persisted)) return { answer, posted: true }
            if (!raced(persisted.failure, tries)) return yield* Effect.fail(unavailable(persisted.failure))
            continue
          }
          const postings = ledger.drain()
          const recorded = yield* Effect.result(record)
          if (Result.isFailure(recorded)) {
            // What is in memory holds postings the store will not have.
            if (postings.length > 0) yield* Effect.ignore(Effect.andThen(Effect.sync(() => (stale = true)), rebuild))
            return yield* Effect.fail(recorded.failure)
          }
          const persisted = yield* Effect.result(persist(before, fence, postings))
          if (Result.isFailure(persisted)) {
            yield* Effect.logWarning(
              `ledger: postings after their record were not stored (${
                refusal(persisted.failure)
              }); settled again at the next step`
            )
          }
          return { answer, posted: Result.isSuccess(persisted) }
        }
      })

    const service: LedgerShape = {
      // A read of a stale ledger tries the store first, and otherwise answers from memory (reads are advice).
      read: (f) =>
        underLock((askedAt) => Effect.andThen(Effect.ignore(current(askedAt)), Effect.sync(() => f(ledger)))),
      update: (f, fence = []) => Effect.map(updateAfter(f, fence, () => undefined), ({ answer }) => answer),
      updateAfter
    }
    if (options.starterMicro > 0n && !ledger.has(starterKey)) {
      const now = yield* Clock.currentTimeMillis
      // Processes sharing a new store may start together: the one whose grant lost the race finds it made on retrying.
      yield* Effect.orDie(
        Effect.retry(service.update((current) => current.grant(starterKey, now, options.starterMicro, "starter")), {
          times: 3
        })
      )
    }
    return service
  })
}
