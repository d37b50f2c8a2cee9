/**
 * The ledger (docs/billing.md, "Ledger"): double-entry, append-only postings in integer micro-USD. Every posting moves
 * a positive amount from one account to another, so the balances of all accounts always sum to zero, and every
 * balance the API shows (available, held, charged, arrears; `status.cost` of an object) is a sum over postings.
 *
 * Accounts:
 * - `external` — where credits come from (CreditGrants, TopUps) and go back to (refunds); its balance is minus the
 *   credits received, so `credits = available + held + charged + arrears` (arrears ≤ 0: what is owed).
 * - `available` — the balance new holds draw on; never negative.
 * - `held/<hold>` — one per hold: money set aside for a run before capacity starts, captured as it is spent.
 * - `charged/<owner>` — what an object (by uid) was charged; each charge names its cost segment.
 * - `arrears` — goes negative when a charge exceeds held plus available money; credits that arrive later pay it first.
 *
 * Every operation has a key: applying a key again is a no-op that answers the first result, so a retried request, a
 * replayed controller step or a restarted server never posts twice. The ledger is pure and synchronous; drivers
 * persist its postings (the store) and rebuild it with `replay`.
 */
import { minMicro } from "../Money.ts"

/** Cost segments (spec: CostSegments). */
export const segments = ["Boot", "Running", "Restore", "Teardown"] as const
export type Segment = typeof segments[number]

export type PostingKind =
  /** external → available: a CreditGrant (starter, promo, top-up, admin). */
  | "Grant"
  /** available (then arrears) → external: a refunded top-up. */
  | "Refund"
  /** available → held/<hold>: a new hold, or more money on an open one. */
  | "Hold"
  /** held/<hold> or available → charged/<owner>: a charge. */
  | "Capture"
  /** arrears → charged/<owner>: the part of a charge no money covered. */
  | "Arrears"
  /** available → arrears: credits paying what is owed. */
  | "Settle"
  /** held/<hold> → available: what a hold did not spend, back when it ends (amount 0 marks a fully captured hold). */
  | "Release"
  /** held/<hold> → available: as Release, for a hold whose run was never seen to end. */
  | "Expire"

export interface Posting {
  /** 1-based position in the ledger. */
  readonly seq: number
  /** `<operation key>#<n>`: the operation that made it, which makes a retried operation a no-op. */
  readonly key: string
  /** Epoch milliseconds (the injected clock). */
  readonly at: number
  readonly kind: PostingKind
  readonly from: string
  readonly to: string
  /** Micro-USD; above zero except the zero Release that closes a fully captured hold. */
  readonly amount: bigint
  /** The object (uid) a hold or charge belongs to. */
  readonly owner?: string
  readonly hold?: string
  readonly segment?: Segment
  /** A new hold's expiry: an open hold past it is expired by `expire`. */
  readonly expiresAt?: number
  /** A grant's or refund's source object (the CreditGrant or TopUp name). */
  readonly source?: string
}

export const externalAccount = "external"
export const availableAccount = "available"
export const arrearsAccount = "arrears"
const heldPrefix = "held/"
export const heldAccount = (hold: string): string => `${heldPrefix}${hold}`
export const chargedAccount = (owner: string): string => `charged/${owner}`

/** How a hold ended (every hold ends one of these ways). */
export type HoldState = "Open" | "Captured" | "Released" | "Expired"

export interface Hold {
  readonly id: string
  readonly owner: string
  readonly openedAt: number
  expiresAt: number
  state: HoldState
}

/** What an owner was charged, in total and per segment (micro-USD). */
export interface Charges {
  total: bigint
  readonly bySegment: Record<Segment, bigint>
}

/** A hold that does not fit the available balance: nothing was posted. */
export interface Shortfall {
  readonly _tag: "Shortfall"
  readonly needed: bigint
  readonly available: bigint
}

export type HoldResult = { readonly _tag: "Held"; readonly postings: ReadonlyArray<Posting> } | Shortfall

const noPostings: ReadonlyArray<Posting> = []

export interface LedgerOptions {
  /**
   * Keep every posting in memory (`postings`, and what drivers persist). A long headless simulation that needs only
   * the balances turns this off; sums, holds and keys are kept either way.
   */
  readonly retain?: boolean
}

export class Ledger {
  private readonly balances = new Map<string, bigint>()
  private readonly applied = new Map<string, ReadonlyArray<Posting>>()
  private readonly chargesOf = new Map<string, Charges>()
  /** Charges per hold (the run it was placed for), per segment. */
  private readonly chargesOnHold = new Map<string, Charges>()
  /** Charges per owner by posting time, so a Budget sums a period without walking postings (`chargedSince`). */
  private readonly chargeTimes = new Map<string, ChargeTimes>()
  readonly holds = new Map<string, Hold>()
  /** The open holds (what `expire` walks), and per owner. */
  private readonly open = new Map<string, Hold>()
  private readonly openByOwner = new Map<string, Set<Hold>>()
  readonly postings: Array<Posting> = []
  private readonly retain: boolean
  private seq = 0
  private heldTotal = 0n
  private chargedTotal = 0n
  /** Postings since the last `drain` (what a driver still has to persist). */
  private unsaved: Array<Posting> = []
  /** For the postings since the last `drain`: the expiry of the hold each Hold posting on an existing hold raised. */
  private expiriesBefore = new Map<number, number>()
  /** The batch the last `drain` answered, until the next: what `undoDrained` takes back. */
  private drained: DrainedBatch = noBatch

  constructor(options: LedgerOptions = {}) {
    this.retain = options.retain ?? true
  }

  /** Rebuilds a ledger from persisted postings, in order. */
  static replay(postings: Iterable<Posting>, options: LedgerOptions = {}): Ledger {
    const ledger = new Ledger(options)
    ledger.extend(postings)
    return ledger
  }

  /**
   * Applies persisted postings that follow this ledger's last, in order: those another process sharing the store
   * posted since (docs/scale-out.md). A ledger with postings not yet persisted must be rebuilt instead.
   */
  extend(postings: Iterable<Posting>): void {
    for (const posting of postings) if (posting.seq > this.seq) this.apply(posting, true)
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Reading

  balance(account: string): bigint {
    return this.balances.get(account) ?? 0n
  }

  get available(): bigint {
    return this.balance(availableAccount)
  }

  /** Credits received, net of refunds. */
  get credits(): bigint {
    return -this.balance(externalAccount)
  }

  /** What is owed: charges no money covered, not yet paid (≥ 0). */
  get arrears(): bigint {
    return -this.balance(arrearsAccount)
  }

  /** Money held by every open hold (a closed hold's account is empty, so this is every hold account's sum). */
  get held(): bigint {
    return this.heldTotal
  }

  /** Every charge posted, to every owner. */
  get charged(): bigint {
    return this.chargedTotal
  }

  heldBy(owner: string): bigint {
    let total = 0n
    for (const hold of this.openByOwner.get(owner) ?? []) total += this.balance(heldAccount(hold.id))
    return total
  }

  chargesFor(owner: string): Charges {
    return this.chargesOf.get(owner) ?? emptyCharges()
  }

  /** What an owner was charged by postings made at or after `at` (epoch ms): a Budget's spending this period. */
  chargedSince(owner: string, at: number): bigint {
    const times = this.chargeTimes.get(owner)
    if (times === undefined) return 0n
    const first = firstAtOrAfter(times.ats, at)
    const total = times.sums[times.sums.length - 1]!
    return first === 0 ? total : total - times.sums[first - 1]!
  }

  /** The seq of the last posting (0 when none): a reader may keep what it derived until this moves. */
  get lastSeq(): number {
    return this.seq
  }

  /** What the run a hold was placed for was charged (beyond the hold too). */
  chargesOn(hold: string): Charges {
    return this.chargesOnHold.get(hold) ?? emptyCharges()
  }

  /** Money still held by one hold (0 once it ended). */
  remaining(hold: string): bigint {
    return this.open.has(hold) ? this.balance(heldAccount(hold)) : 0n
  }

  get openHolds(): Iterable<Hold> {
    return this.open.values()
  }

  /** Whether an operation key was applied (its postings were made). */
  has(key: string): boolean {
    return this.applied.has(key)
  }

  /** Postings made since the last drain (retained ledgers only), for a driver to persist. */
  drain(): ReadonlyArray<Posting> {
    const unsaved = this.unsaved
    this.drained = { postings: unsaved, expiriesBefore: this.expiriesBefore }
    this.unsaved = []
    this.expiriesBefore = new Map()
    return unsaved
  }

  /**
   * Takes back the postings the last `drain` answered, which the store refused (another process posted those seqs
   * first): the ledger is as before they were made, and `extend` takes in the other process's postings next. Cheaper
   * than a replay of every posting (docs/scale-out.md). They must be the last postings made. An open hold they closed
   * is open again, at the end of the open holds' order (an expiry in one step then releases it after the others).
   */
  undoDrained(): void {
    const { postings, expiriesBefore } = this.drained
    this.drained = noBatch
    if (postings.length === 0) return
    if (postings[postings.length - 1]!.seq !== this.seq) {
      throw new Error(`undo: posting ${this.seq} was made after the drained ones`)
    }
    for (let index = postings.length - 1; index >= 0; index--) this.unapply(postings[index]!, expiriesBefore)
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Operations (each keyed; a key applied before answers its first postings and posts nothing)

  /** Credits arrive (a CreditGrant); they pay arrears first. */
  grant(key: string, at: number, amount: bigint, source: string): ReadonlyArray<Posting> {
    return this.once(key, (post) => {
      post({ kind: "Grant", at, from: externalAccount, to: availableAccount, amount, source })
      this.settle(post, at)
    })
  }

  /**
   * Credits go back (a refunded TopUp): from the available balance, and beyond it as arrears, since credits already
   * spent cannot be taken back from the work they paid for.
   */
  refund(key: string, at: number, amount: bigint, source: string): ReadonlyArray<Posting> {
    return this.once(key, (post) => {
      const fromAvailable = minMicro(amount, this.available)
      if (fromAvailable > 0n) {
        post({ kind: "Refund", at, from: availableAccount, to: externalAccount, amount: fromAvailable, source })
      }
      if (amount > fromAvailable) {
        post({ kind: "Refund", at, from: arrearsAccount, to: externalAccount, amount: amount - fromAvailable, source })
      }
    })
  }

  /**
   * Opens a hold, or adds to an open one (the same hold id): the whole amount must fit the available balance, else
   * nothing is posted and the shortfall is answered.
   */
  hold(
    key: string,
    at: number,
    request: { readonly hold: string; readonly owner: string; readonly amount: bigint; readonly expiresAt: number }
  ): HoldResult {
    const done = this.applied.get(key)
    if (done !== undefined) return { _tag: "Held", postings: done }
    const existing = this.holds.get(request.hold)
    if (existing !== undefined && existing.state !== "Open") {
      throw new Error(`hold ${request.hold} is ${existing.state}`)
    }
    if (request.amount > this.available) return { _tag: "Shortfall", needed: request.amount, available: this.available }
    const postings = this.once(key, (post) => {
      post({
        kind: "Hold",
        at,
        from: availableAccount,
        to: heldAccount(request.hold),
        amount: request.amount,
        owner: request.owner,
        hold: request.hold,
        expiresAt: request.expiresAt
      })
    })
    return { _tag: "Held", postings }
  }

  /**
   * Charges `amount` to `owner` in `segment`: from the hold first, then the available balance, and what no money
   * covers as arrears (billing.arrears_posted). No charge ever takes more than held plus available money.
   */
  capture(
    key: string,
    at: number,
    request: {
      readonly hold: string | undefined
      readonly owner: string
      readonly segment: Segment
      readonly amount: bigint
    }
  ): ReadonlyArray<Posting> {
    return this.once(key, (post) => {
      const { owner, segment } = request
      let left = request.amount
      const hold = request.hold === undefined ? undefined : this.holds.get(request.hold)
      if (hold !== undefined && hold.state === "Open") {
        const fromHold = minMicro(left, this.balance(heldAccount(hold.id)))
        if (fromHold > 0n) {
          post({
            kind: "Capture",
            at,
            from: heldAccount(hold.id),
            to: chargedAccount(owner),
            amount: fromHold,
            owner,
            hold: hold.id,
            segment
          })
        }
        left -= fromHold
      }
      // Beyond the hold, postings still name it: what a run was charged is summed per hold.
      const attribution = request.hold === undefined ? {} : { hold: request.hold }
      const fromAvailable = minMicro(left, this.available)
      if (fromAvailable > 0n) {
        post({
          kind: "Capture",
          at,
          from: availableAccount,
          to: chargedAccount(owner),
          amount: fromAvailable,
          owner,
          segment,
          ...attribution
        })
      }
      left -= fromAvailable
      if (left > 0n) {
        post({
          kind: "Arrears",
          at,
          from: arrearsAccount,
          to: chargedAccount(owner),
          amount: left,
          owner,
          segment,
          ...attribution
        })
      }
    })
  }

  /** Ends an open hold: what it did not spend goes back to the available balance (and pays arrears first). */
  release(key: string, at: number, hold: string, how: "Release" | "Expire" = "Release"): ReadonlyArray<Posting> {
    const open = this.open.get(hold)
    if (open === undefined) return this.applied.get(key) ?? noPostings
    return this.once(key, (post) => {
      post({
        kind: how,
        at,
        from: heldAccount(hold),
        to: availableAccount,
        amount: this.balance(heldAccount(hold)),
        owner: open.owner,
        hold
      })
      this.settle(post, at)
    })
  }

  /** Expires every open hold whose expiry has passed (a run never seen to end, e.g. its object vanished). */
  expire(at: number): ReadonlyArray<Posting> {
    const made: Array<Posting> = []
    for (const hold of [...this.open.values()]) {
      if (hold.expiresAt <= at) made.push(...this.release(`expire/${hold.id}`, at, hold.id, "Expire"))
    }
    return made
  }

  /** Moves an open hold's expiry (a hold extended as its run goes on). */
  extendExpiry(hold: string, expiresAt: number) {
    const open = this.open.get(hold)
    if (open !== undefined && expiresAt > open.expiresAt) open.expiresAt = expiresAt
  }

  // -------------------------------------------------------------------------------------------------------------------
  // Posting

  /** Credits that reach the available balance pay what is owed first. */
  private settle(post: (posting: Omit<Posting, "seq" | "key">) => void, at: number) {
    const owed = this.arrears
    const paid = minMicro(owed, this.available)
    if (paid > 0n) post({ kind: "Settle", at, from: availableAccount, to: arrearsAccount, amount: paid })
  }

  private once(
    key: string,
    body: (post: (posting: Omit<Posting, "seq" | "key">) => void) => void
  ): ReadonlyArray<Posting> {
    const done = this.applied.get(key)
    if (done !== undefined) return done
    const made: Array<Posting> = []
    body((fields) => {
      const posting: Posting = { seq: this.seq + 1, key: `${key}#${made.length}`, ...fields }
      this.apply(posting, false)
      made.push(posting)
    })
    if (made.length > 0) this.applied.set(key, made)
    return made
  }

  private opened(posting: Posting, id: string) {
    if (this.holds.has(id)) {
      const hold = this.holds.get(id)!
      if (posting.expiresAt !== undefined && posting.expiresAt > hold.expiresAt) hold.expiresAt = posting.expiresAt
      return
    }
    const hold: Hold = {
      id,
      owner: posting.owner ?? "",
      openedAt: posting.at,
      expiresAt: posting.expiresAt ?? Number.POSITIVE_INFINITY,
      state: "Open"
    }
    this.holds.set(id, hold)
    this.open.set(id, hold)
    let owned = this.openByOwner.get(hold.owner)
    if (owned === undefined) this.openByOwner.set(hold.owner, owned = new Set())
    owned.add(hold)
  }

  /** A hold that spent everything ends Captured; one that gave money back, Released (or Expired). */
  private closed(posting: Posting, id: string) {
    const hold = this.holds.get(id)
    if (hold === undefined) return
    hold.state = posting.kind === "Expire" ? "Expired" : posting.amount === 0n ? "Captured" : "Released"
    this.open.delete(id)
    const owned = this.openByOwner.get(hold.owner)
    owned?.delete(hold)
    if (owned?.size === 0) this.openByOwner.delete(hold.owner)
  }

  private apply(posting: Posting, replaying: boolean) {
    if (posting.amount < 0n || (posting.amount === 0n && posting.kind !== "Release" && posting.kind !== "Expire")) {
      throw new Error(`posting ${posting.key}: amount ${posting.amount} must be above zero`)
    }
    // What `undoDrained` needs of a posting still to be stored (retained ledgers drain; a headless one keeps none).
    if (this.retain && !replaying && posting.kind === "Hold" && posting.hold !== undefined) {
      const existing = this.holds.get(posting.hold)
      if (existing !== undefined) this.expiriesBefore.set(posting.seq, existing.expiresAt)
    }
    this.seq = posting.seq
    this.balances.set(posting.from, this.balance(posting.from) - posting.amount)
    this.balances.set(posting.to, this.balance(posting.to) + posting.amount)
    // Running sums, so the account's totals cost nothing to read (the server reads them around every operation).
    if (posting.from.startsWith(heldPrefix)) this.heldTotal -= posting.amount
    if (posting.to.startsWith(heldPrefix)) this.heldTotal += posting.amount
    if (posting.kind === "Hold" && posting.hold !== undefined) this.opened(posting, posting.hold)
    if ((posting.kind === "Release" || posting.kind === "Expire") && posting.hold !== undefined) {
      this.closed(posting, posting.hold)
    }
    if (
      (posting.kind === "Capture" || posting.kind === "Arrears") && posting.owner !== undefined &&
      posting.segment !== undefined
    ) {
      addCharge(this.chargesOf, posting.owner, posting.segment, posting.amount)
      this.chargedTotal += posting.amount
      addChargeTime(this.chargeTimes, posting.owner, posting.at, posting.amount)
      if (posting.hold !== undefined) addCharge(this.chargesOnHold, posting.hold, posting.segment, posting.amount)
    }
    if (replaying) {
      const operation = posting.key.slice(0, posting.key.lastIndexOf("#"))
      this.applied.set(operation, [...(this.applied.get(operation) ?? []), posting])
    }
    if (this.retain) {
      this.postings.push(posting)
      if (!replaying) this.unsaved.push(posting)
    }
  }

  /** `apply` taken back: the last posting made goes. */
  private unapply(posting: Posting, expiriesBefore: ReadonlyMap<number, number>) {
    this.seq = posting.seq - 1
    this.balances.set(posting.from, this.balance(posting.from) + posting.amount)
    this.balances.set(posting.to, this.balance(posting.to) - posting.amount)
    if (posting.from.startsWith(heldPrefix)) this.heldTotal += posting.amount
    if (posting.to.startsWith(heldPrefix)) this.heldTotal -= posting.amount
    if (posting.kind === "Hold" && posting.hold !== undefined) {
      this.unopened(posting.hold, expiriesBefore.get(posting.seq))
    }
    if ((posting.kind === "Release" || posting.kind === "Expire") && posting.hold !== undefined) {
      this.reopened(posting.hold)
    }
    if (
      (posting.kind === "Capture" || posting.kind === "Arrears") && posting.owner !== undefined &&
      posting.segment !== undefined
    ) {
      addCharge(this.chargesOf, posting.owner, posting.segment, -posting.amount)
      this.chargedTotal -= posting.amount
      addChargeTime(this.chargeTimes, posting.owner, posting.at, -posting.amount)
      if (posting.hold !== undefined) addCharge(this.chargesOnHold, posting.hold, posting.segment, -posting.amount)
    }
    this.applied.delete(posting.key.slice(0, posting.key.lastIndexOf("#")))
    if (this.retain) this.postings.pop()
  }

  /** A Hold posting taken back: the hold it opened is gone, or the expiry it raised is back. */
  private unopened(id: string, expiryBefore: number | undefined) {
    const hold = this.holds.get(id)
    if (hold === undefined) return
    if (expiryBefore !== undefined) {
      hold.expiresAt = expiryBefore
      return
    }
    this.holds.delete(id)
    this.open.delete(id)
    const owned = this.openByOwner.get(hold.owner)
    owned?.delete(hold)
    if (owned?.size === 0) this.openByOwner.delete(hold.owner)
  }

  /** A Release or Expire taken back: the hold is open again. */
  private reopened(id: string) {
    const hold = this.holds.get(id)
    if (hold === undefined) return
    hold.state = "Open"
    this.open.set(id, hold)
    let owned = this.openByOwner.get(hold.owner)
    if (owned === undefined) this.openByOwner.set(hold.owner, owned = new Set())
    owned.add(hold)
  }
}

const addCharge = (charges: Map<string, Charges>, key: string, segment: Segment, amount: bigint) => {
  let entry = charges.get(key)
  if (entry === undefined) charges.set(key, entry = emptyCharges())
  entry.total += amount
  entry.bySegment[segment] += amount
}

/** An owner's charges by time: `ats` ascending and distinct, `sums[i]` the charges posted at or before `ats[i]`. */
interface ChargeTimes {
  readonly ats: Array<number>
  readonly sums: Array<bigint>
}

/** The first index whose time is at or after `at` (`ats.length` when none). */
const firstAtOrAfter = (ats: ReadonlyArray<number>, at: number): number => {
  let low = 0
  let high = ats.length
  while (low < high) {
    const middle = (low + high) >>> 1
    if (ats[middle]! < at) low = middle + 1
    else high = middle
  }
  return low
}

const addChargeTime = (byOwner: Map<string, ChargeTimes>, owner: string, at: number, amount: bigint) => {
  let times = byOwner.get(owner)
  if (times === undefined) byOwner.set(owner, times = { ats: [], sums: [] })
  const { ats, sums } = times
  const last = ats.length - 1
  // Postings usually come in time order: one entry per instant, appended. An earlier time is inserted in place.
  if (last >= 0 && ats[last] === at) sums[last] = sums[last]! + amount
  else if (last < 0 || ats[last]! < at) {
    ats.push(at)
    sums.push((last < 0 ? 0n : sums[last]!) + amount)
  } else {
    const position = firstAtOrAfter(ats, at)
    if (ats[position] !== at) {
      ats.splice(position, 0, at)
      sums.splice(position, 0, position === 0 ? 0n : sums[position - 1]!)
    }
    for (let later = position; later < sums.length; later++) sums[later] = sums[later]! + amount
  }
}

/** What one `drain` answered, for `undoDrained`. */
interface DrainedBatch {
  readonly postings: ReadonlyArray<Posting>
  readonly expiriesBefore: ReadonlyMap<number, number>
}

const noBatch: DrainedBatch = { postings: [], expiriesBefore: new Map() }

const emptyCharges = (): Charges => ({ total: 0n, bySegment: { Boot: 0n, Running: 0n, Restore: 0n, Teardown: 0n } })
