/**
 * Which grant the unspent credits belong to (docs/billing.md, "Credits"). The ledger knows how much money is not yet
 * spent — the available balance plus what holds set aside — but money is fungible there: it does not say which
 * CreditGrant a charge used up. A CreditGrant's `status.remainingUSD` needs that answer, so this module attributes
 * the ledger's postings to grants by one rule (nodus):
 *
 * - every Grant posting opens a lot for its source (the CreditGrant's name);
 * - money that leaves the available balance or a hold — a charge, credits paying arrears, a refund — comes out of
 *   the lots that expire first, then the oldest (first granted, first spent), so credits that would lapse are used
 *   before credits that never do;
 * - a refund takes from its own grant's lot first (a refunded TopUp takes back its own credits), then as any spending;
 * - moves between the available balance and holds spend nothing (held money is still the account's).
 *
 * So the lots always sum to available + held, and each lot stays between zero and what it granted. The attribution is
 * a fold over the postings in order: `CreditLots` takes them one at a time, so a server follows its ledger without
 * reading it again. Pure: time comes in with the postings.
 */
import { availableAccount, type Posting } from "./Ledger.ts"

/** The credits of one grant. */
export interface GrantLot {
  /** The CreditGrant the credits came from (the Grant posting's `source`). */
  readonly source: string
  /** The key of the operation that granted them (e.g. `grant/starter`, `topup/<uid>`). */
  readonly key: string
  /** When they were granted (epoch ms). */
  readonly grantedAt: number
  /** Seq of the Grant posting: of two lots expiring together, the lower is spent first. */
  readonly seq: number
  /** When its unspent credits expire (epoch ms); undefined: never. */
  readonly expiresAt: number | undefined
  /** Micro-USD granted. */
  granted: bigint
  /** Micro-USD not yet spent (0 ≤ remaining ≤ granted). */
  remaining: bigint
}

/** CreditGrant phases shown (schemas/CreditGrant.ts); Expired waits for enforced expiry (docs/billing.md). */
export type GrantPhase = "Active" | "Exhausted"

export const phaseOf = (lot: GrantLot): GrantPhase => (lot.remaining > 0n ? "Active" : "Exhausted")

/** Accounts that hold the account's unspent money: the available balance and every hold. */
const isUnspent = (account: string): boolean => account === availableAccount || account.startsWith("held/")

/** Spending order: first to expire (never expiring last), then oldest. */
export const spendsBefore = (a: GrantLot, b: GrantLot): boolean => {
  if (a.expiresAt !== b.expiresAt) {
    if (a.expiresAt === undefined) return false
    if (b.expiresAt === undefined) return true
    return a.expiresAt < b.expiresAt
  }
  return a.seq < b.seq
}

export class CreditLots {
  readonly lots = new Map<string, GrantLot>()
  /** Lots with credits left, in spending order. */
  private queue: Array<GrantLot> = []
  /** Seq and key of the last posting taken (a follower checks the ledger still has it there). */
  lastSeq = 0
  lastKey: string | undefined = undefined

  /** Takes the next posting; `expiresAt` is the expiry of a Grant posting's grant (undefined: never). */
  apply(posting: Posting, expiresAt?: number): void {
    this.lastSeq = posting.seq
    this.lastKey = posting.key
    if (posting.kind === "Grant" && posting.source !== undefined) return this.granted(posting, expiresAt)
    if (!isUnspent(posting.from) || isUnspent(posting.to)) return
    let left = posting.amount
    if (posting.kind === "Refund" && posting.source !== undefined) {
      const own = this.lots.get(posting.source)
      if (own !== undefined) left -= this.take(own, left)
    }
    while (left > 0n && this.queue.length > 0) left -= this.take(this.queue[0]!, left)
  }

  /** The lots' total: always the ledger's available + held. */
  get remaining(): bigint {
    let total = 0n
    for (const lot of this.queue) total += lot.remaining
    return total
  }

  private granted(posting: Posting, expiresAt: number | undefined) {
    const existing = this.lots.get(posting.source!)
    if (existing !== undefined) {
      // One source granted twice (not done by nodus, but the ledger allows it): one lot, both amounts.
      existing.granted += posting.amount
      if (existing.remaining === 0n) this.enqueue(existing)
      existing.remaining += posting.amount
      return
    }
    const lot: GrantLot = {
      source: posting.source!,
      key: operationOf(posting),
      grantedAt: posting.at,
      seq: posting.seq,
      expiresAt,
      granted: posting.amount,
      remaining: posting.amount
    }
    this.lots.set(lot.source, lot)
    this.enqueue(lot)
  }

  private enqueue(lot: GrantLot) {
    const at = this.queue.findIndex((queued) => spendsBefore(lot, queued))
    if (at === -1) this.queue.push(lot)
    else this.queue.splice(at, 0, lot)
  }

  /** Takes up to `wanted` from a lot; a lot emptied leaves the queue. */
  private take(lot: GrantLot, wanted: bigint): bigint {
    const taken = lot.remaining < wanted ? lot.remaining : wanted
    lot.remaining -= taken
    if (lot.remaining === 0n && taken > 0n) this.queue.splice(this.queue.indexOf(lot), 1)
    return taken
  }
}

/** The operation key of a posting (`grant/starter#0` → `grant/starter`). */
export const operationOf = (posting: Posting): string => posting.key.slice(0, posting.key.lastIndexOf("#"))
