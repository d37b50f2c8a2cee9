/**
 * `Ledger.undoDrained` (src/core/billing/Ledger.ts): a server whose commit of postings another process beat takes its
 * postings back instead of replaying every posting (runtime/LedgerService.ts). The property: any sequence of
 * operations, each one's postings drained and then either kept (stored) or refused (taken back), leaves the ledger
 * exactly as a replay of the kept postings would be — every balance, hold, charge, charge by time and key.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { type Hold, Ledger, type Posting, type Segment, segments } from "../../../src/core/billing/Ledger.ts"

type Operation =
  | { readonly type: "grant" | "refund"; readonly amount: bigint }
  | {
    readonly type: "hold"
    readonly slot: number
    readonly fresh: boolean
    readonly owner: number
    readonly amount: bigint
    readonly window: number
  }
  | {
    readonly type: "capture"
    readonly slot: number
    readonly owner: number
    readonly segment: Segment
    readonly amount: bigint
  }
  | { readonly type: "release"; readonly slot: number }
  | { readonly type: "expire" }
  | { readonly type: "repeat"; readonly pick: number }

interface Step {
  readonly operation: Operation
  readonly dt: number
  /** Whether the store refuses the step's postings (they are taken back). */
  readonly refused: boolean
}

const slots = 4
const owners = ["o0", "o1", "o2"]
const minuteMs = 60_000

const operationArb: fc.Arbitrary<Operation> = fc.oneof(
  fc.record({
    type: fc.constantFrom("grant" as const, "refund" as const),
    amount: fc.bigInt({ min: 1n, max: 200_000n })
  }),
  fc.record({
    type: fc.constant("hold" as const),
    slot: fc.nat(slots - 1),
    fresh: fc.boolean(),
    owner: fc.nat(owners.length - 1),
    amount: fc.bigInt({ min: 1n, max: 100_000n }),
    window: fc.nat(120 * minuteMs)
  }),
  fc.record({
    type: fc.constant("capture" as const),
    slot: fc.nat(slots),
    owner: fc.nat(owners.length - 1),
    segment: fc.constantFrom(...segments),
    amount: fc.bigInt({ min: 1n, max: 60_000n })
  }),
  fc.record({ type: fc.constant("release" as const), slot: fc.nat(slots) }),
  fc.record({ type: fc.constant("expire" as const) }),
  fc.record({ type: fc.constant("repeat" as const), pick: fc.nat() })
)

const stepArb: fc.Arbitrary<Step> = fc.record({
  operation: operationArb,
  dt: fc.oneof(fc.constant(0), fc.nat(30 * minuteMs)),
  refused: fc.nat(3).map((n) => n === 0)
})

/** Runs the steps: answers the ledger, the postings kept, and every key and hold id used. */
const run = (steps: ReadonlyArray<Step>) => {
  const ledger = new Ledger()
  const kept: Array<Posting> = []
  const slotHolds: Array<string | undefined> = Array.from({ length: slots }, () => undefined)
  const calls: Array<{ readonly key: string; readonly invoke: () => void }> = []
  const holdIds = new Set<string>()
  let now = Date.UTC(2026, 10, 28)
  let count = 0
  for (const { operation, dt, refused } of steps) {
    now += dt
    const at = now
    const key = `${operation.type}/${++count}`
    const invoke = ((): (() => void) | undefined => {
      switch (operation.type) {
        case "grant":
          return () => void ledger.grant(key, at, operation.amount, "test")
        case "refund":
          return () => void ledger.refund(key, at, operation.amount, "test")
        case "hold": {
          // More money goes on an open hold only (a hold that ended takes none): otherwise a new one.
          const previous = slotHolds[operation.slot]
          const open = previous !== undefined && ledger.holds.get(previous)?.state === "Open"
          const hold = operation.fresh || !open ? `h${count}` : previous
          slotHolds[operation.slot] = hold
          holdIds.add(hold)
          return () =>
            void ledger.hold(key, at, {
              hold,
              owner: owners[operation.owner]!,
              amount: operation.amount,
              expiresAt: at + operation.window
            })
        }
        case "capture":
          return () =>
            void ledger.capture(key, at, {
              hold: slotHolds[operation.slot],
              owner: owners[operation.owner]!,
              segment: operation.segment,
              amount: operation.amount
            })
        case "release": {
          const hold = slotHolds[operation.slot]
          return hold === undefined ? undefined : () => void ledger.release(key, at, hold)
        }
        case "expire":
          return () => void ledger.expire(at)
        case "repeat":
          // The same operation again under its key: a no-op if its postings stand, made again if they were refused.
          return calls.length === 0 ? undefined : calls[operation.pick % calls.length]!.invoke
      }
    })()
    if (invoke === undefined) continue
    try {
      invoke()
    } catch (error) {
      // A hold made again (its first postings refused) after the hold ended: refused whole, nothing posted.
      if (!/is (Released|Expired|Captured)/u.test(String(error)) || ledger.drain().length > 0) throw error
      continue
    }
    if (operation.type !== "repeat") calls.push({ key, invoke })
    const drained = ledger.drain()
    if (refused) ledger.undoDrained()
    else kept.push(...drained)
  }
  return { ledger, kept, keys: calls.map((call) => call.key), holdIds, end: now }
}

const holdState = (hold: Hold) => ({
  id: hold.id,
  owner: hold.owner,
  openedAt: hold.openedAt,
  expiresAt: hold.expiresAt,
  state: hold.state
})

/** Everything a ledger shows, in an order that does not depend on how it got there. */
const shown = (ledger: Ledger, keys: ReadonlyArray<string>, holdIds: ReadonlySet<string>, end: number) => ({
  lastSeq: ledger.lastSeq,
  totals: {
    available: ledger.available,
    arrears: ledger.arrears,
    credits: ledger.credits,
    held: ledger.held,
    charged: ledger.charged
  },
  holds: [...ledger.holds.values()].map(holdState).sort((a, b) => a.id.localeCompare(b.id)),
  open: [...ledger.openHolds].map((hold) => hold.id).sort(),
  byHold: [...holdIds].sort().map((hold) => ({
    hold,
    remaining: ledger.remaining(hold),
    charges: ledger.chargesOn(hold)
  })),
  byOwner: owners.map((owner) => ({
    owner,
    charges: ledger.chargesFor(owner),
    heldBy: ledger.heldBy(owner),
    since: [0, 30, 120, 600].map((minutes) => ledger.chargedSince(owner, end - minutes * minuteMs))
  })),
  keys: keys.map((key) => ledger.has(key))
})

describe("Ledger.undoDrained", () => {
  it("postings taken back leave the ledger as a replay of the postings kept", () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 60 }), (steps) => {
        const { ledger, kept, keys, holdIds, end } = run(steps)
        const replayed = Ledger.replay(kept)
        expect(ledger.postings).toEqual(kept)
        expect(shown(ledger, keys, holdIds, end)).toEqual(shown(replayed, keys, holdIds, end))
      }),
      { numRuns: 20_000 }
    )
  })

  it("refuses to take back postings that are no longer the last ones made", () => {
    const ledger = new Ledger()
    ledger.grant("grant/a", 0, 10n, "test")
    ledger.drain()
    ledger.grant("grant/b", 1, 10n, "test")
    expect(() => ledger.undoDrained()).toThrow(/made after the drained ones/u)
  })
})
