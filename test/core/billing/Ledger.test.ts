/**
 * The ledger (src/core/billing/Ledger.ts): double-entry postings in integer micro-USD. The table tests take one
 * operation at a time (grant, refund, hold, capture, release, expire), then keys, replay, drain and retain. The
 * property runs long random sequences of operations, retries of earlier keys among them, against a small model of the
 * rules. After every operation it checks the accounting identities: the accounts sum to zero, and credits = available +
 * held + charged − arrears. It also checks that a retry never charges twice.
 */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  arrearsAccount,
  availableAccount,
  chargedAccount,
  type Charges,
  externalAccount,
  heldAccount,
  type HoldResult,
  type HoldState,
  Ledger,
  type Posting,
  type Segment,
  segments
} from "../../../src/core/billing/Ledger.ts"

const T = 1_000_000
const hour = 3_600_000

const fresh = (credits = 0n): Ledger => {
  const ledger = new Ledger()
  if (credits > 0n) ledger.grant("grant/start", T, credits, "starter")
  ledger.drain()
  return ledger
}

const bySegment = (values: Partial<Record<Segment, bigint>> = {}): Record<Segment, bigint> => ({
  Boot: 0n,
  Running: 0n,
  Restore: 0n,
  Teardown: 0n,
  ...values
})

/** The fields of postings that an operation decides (not seq, key, at). */
const moves = (postings: ReadonlyArray<Posting>) =>
  postings.map(({ kind, from, to, amount }) => ({ kind, from, to, amount }))

const held = (result: HoldResult): ReadonlyArray<Posting> => {
  if (result._tag !== "Held") {
    throw new Error(`expected Held, got a shortfall of ${result.needed} against ${result.available}`)
  }
  return result.postings
}

/** Every balance the API shows, and the ledger's size: what a no-op must leave alone. */
const snapshot = (ledger: Ledger, accounts: ReadonlyArray<string> = []) => ({
  available: ledger.available,
  arrears: ledger.arrears,
  credits: ledger.credits,
  held: ledger.held,
  charged: ledger.charged,
  postings: ledger.postings.length,
  accounts: accounts.map((account) => ledger.balance(account))
})

describe("grant", () => {
  it("moves credits from external to available", () => {
    const ledger = new Ledger()
    const postings = ledger.grant("g1", T, 5_000_000n, "starter")
    expect(postings).toEqual([{
      seq: 1,
      key: "g1#0",
      at: T,
      kind: "Grant",
      from: externalAccount,
      to: availableAccount,
      amount: 5_000_000n,
      source: "starter"
    }])
    expect(ledger.available).toBe(5_000_000n)
    expect(ledger.credits).toBe(5_000_000n)
    expect(ledger.balance(externalAccount)).toBe(-5_000_000n)
    expect(ledger.arrears).toBe(0n)
  })

  it("pays arrears first (Settle), in part or in full", () => {
    const ledger = fresh(100n)
    ledger.capture("c1", T, { hold: undefined, owner: "job", segment: "Running", amount: 150n })
    expect(ledger.arrears).toBe(50n)
    expect(ledger.available).toBe(0n)
    expect(moves(ledger.grant("g1", T + 1, 30n, "topup-1"))).toEqual([
      { kind: "Grant", from: externalAccount, to: availableAccount, amount: 30n },
      { kind: "Settle", from: availableAccount, to: arrearsAccount, amount: 30n }
    ])
    expect([ledger.available, ledger.arrears]).toEqual([0n, 20n])
    expect(moves(ledger.grant("g2", T + 2, 100n, "topup-2"))).toEqual([
      { kind: "Grant", from: externalAccount, to: availableAccount, amount: 100n },
      { kind: "Settle", from: availableAccount, to: arrearsAccount, amount: 20n }
    ])
    expect([ledger.available, ledger.arrears, ledger.credits, ledger.charged]).toEqual([80n, 0n, 230n, 150n])
  })

  it("refuses a zero amount and posts nothing", () => {
    const ledger = fresh(10n)
    expect(() => ledger.grant("g0", T, 0n, "nothing")).toThrow(/above zero/u)
    expect(ledger.has("g0")).toBe(false)
    expect(ledger.postings.length).toBe(1)
    expect(ledger.available).toBe(10n)
  })
})

describe("refund", () => {
  it("takes credits back from the available balance", () => {
    const ledger = fresh(1_000n)
    expect(moves(ledger.refund("r1", T, 400n, "topup-1"))).toEqual([{
      kind: "Refund",
      from: availableAccount,
      to: externalAccount,
      amount: 400n
    }])
    expect([ledger.available, ledger.credits, ledger.arrears]).toEqual([600n, 600n, 0n])
  })

  it("beyond the available balance, the rest becomes arrears", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("h", T, { hold: "h1", owner: "job", amount: 700n, expiresAt: T + hour }))
    const postings = ledger.refund("r1", T, 500n, "topup-1")
    expect(moves(postings)).toEqual([
      { kind: "Refund", from: availableAccount, to: externalAccount, amount: 300n },
      { kind: "Refund", from: arrearsAccount, to: externalAccount, amount: 200n }
    ])
    expect(postings.every((posting) => posting.source === "topup-1")).toBe(true)
    expect([ledger.available, ledger.arrears, ledger.credits, ledger.held]).toEqual([0n, 200n, 500n, 700n])
    // Nothing available: all of it is owed.
    expect(moves(ledger.refund("r2", T, 50n, "topup-2"))).toEqual([{
      kind: "Refund",
      from: arrearsAccount,
      to: externalAccount,
      amount: 50n
    }])
    expect(ledger.arrears).toBe(250n)
  })
})

describe("hold", () => {
  it("moves money from available to the hold's account", () => {
    const ledger = fresh(1_000n)
    const postings = held(
      ledger.hold("hold/1", T + 5, { hold: "h1", owner: "job-a", amount: 600n, expiresAt: T + hour })
    )
    expect(postings).toEqual([{
      seq: 2,
      key: "hold/1#0",
      at: T + 5,
      kind: "Hold",
      from: availableAccount,
      to: heldAccount("h1"),
      amount: 600n,
      owner: "job-a",
      hold: "h1",
      expiresAt: T + hour
    }])
    expect([ledger.available, ledger.held, ledger.heldBy("job-a"), ledger.heldBy("job-b"), ledger.remaining("h1")])
      .toEqual([400n, 600n, 600n, 0n, 600n])
    expect(ledger.holds.get("h1")).toEqual({
      id: "h1",
      owner: "job-a",
      openedAt: T + 5,
      expiresAt: T + hour,
      state: "Open"
    })
    expect([...ledger.openHolds].map((hold) => hold.id)).toEqual(["h1"])
  })

  it("answers the shortfall when the whole amount does not fit, and posts nothing", () => {
    const ledger = fresh(1_000n)
    const before = snapshot(ledger)
    expect(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 1_001n, expiresAt: T + hour })).toEqual({
      _tag: "Shortfall",
      needed: 1_001n,
      available: 1_000n
    })
    expect(snapshot(ledger)).toEqual(before)
    expect(ledger.drain()).toEqual([])
    expect(ledger.holds.has("h1")).toBe(false)
    expect(ledger.has("hold/1")).toBe(false)
    // The key was not used up: once money arrives, the same request holds.
    ledger.grant("g", T, 1n, "topup")
    expect(moves(held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 1_001n, expiresAt: T + hour }))))
      .toEqual([
        { kind: "Hold", from: availableAccount, to: heldAccount("h1"), amount: 1_001n }
      ])
    expect(ledger.available).toBe(0n)
  })

  it("an exact fit is held", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 1_000n, expiresAt: T + hour }))
    expect([ledger.available, ledger.held]).toEqual([0n, 1_000n])
  })

  it("adds to an open hold, which keeps its owner and opening and takes the later expiry", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 300n, expiresAt: T + hour }))
    held(ledger.hold("hold/2", T + 10, { hold: "h1", owner: "job", amount: 200n, expiresAt: T + 2 * hour }))
    expect([ledger.remaining("h1"), ledger.available, ledger.held]).toEqual([500n, 500n, 500n])
    expect(ledger.holds.get("h1")).toEqual({
      id: "h1",
      owner: "job",
      openedAt: T,
      expiresAt: T + 2 * hour,
      state: "Open"
    })
    // An earlier expiry does not shorten it.
    held(ledger.hold("hold/3", T + 20, { hold: "h1", owner: "job", amount: 100n, expiresAt: T + hour }))
    expect(ledger.holds.get("h1")?.expiresAt).toBe(T + 2 * hour)
    expect(ledger.remaining("h1")).toBe(600n)
    expect([...ledger.openHolds].length).toBe(1)
    // A shortfall on an open hold leaves it as it was.
    expect(ledger.hold("hold/4", T + 30, { hold: "h1", owner: "job", amount: 401n, expiresAt: T + 3 * hour })._tag)
      .toBe("Shortfall")
    expect([ledger.remaining("h1"), ledger.holds.get("h1")?.expiresAt]).toEqual([600n, T + 2 * hour])
  })

  it("refuses to add to a hold that ended", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 300n, expiresAt: T + hour }))
    ledger.release("release/h1", T + 1, "h1")
    expect(() => ledger.hold("hold/2", T + 2, { hold: "h1", owner: "job", amount: 1n, expiresAt: T + hour })).toThrow(
      /Released/u
    )
    expect(ledger.available).toBe(1_000n)
  })
})

describe("capture", () => {
  const setup = (credits: bigint, holding: bigint) => {
    const ledger = fresh(credits)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: holding, expiresAt: T + hour }))
    return ledger
  }

  it("takes a charge from the hold", () => {
    const ledger = setup(1_000n, 600n)
    const postings = ledger.capture("c1", T + 1, { hold: "h1", owner: "job", segment: "Boot", amount: 250n })
    expect(postings).toEqual([{
      seq: 3,
      key: "c1#0",
      at: T + 1,
      kind: "Capture",
      from: heldAccount("h1"),
      to: chargedAccount("job"),
      amount: 250n,
      owner: "job",
      hold: "h1",
      segment: "Boot"
    }])
    expect([ledger.remaining("h1"), ledger.available, ledger.charged, ledger.balance(chargedAccount("job"))]).toEqual([
      350n,
      400n,
      250n,
      250n
    ])
  })

  it("beyond the hold, from the available balance; beyond that, as arrears", () => {
    const ledger = setup(1_000n, 600n)
    expect(moves(ledger.capture("c1", T + 1, { hold: "h1", owner: "job", segment: "Running", amount: 800n }))).toEqual([
      { kind: "Capture", from: heldAccount("h1"), to: chargedAccount("job"), amount: 600n },
      { kind: "Capture", from: availableAccount, to: chargedAccount("job"), amount: 200n }
    ])
    expect([ledger.remaining("h1"), ledger.available, ledger.arrears]).toEqual([0n, 200n, 0n])
    const postings = ledger.capture("c2", T + 2, { hold: "h1", owner: "job", segment: "Teardown", amount: 500n })
    expect(moves(postings)).toEqual([
      { kind: "Capture", from: availableAccount, to: chargedAccount("job"), amount: 200n },
      { kind: "Arrears", from: arrearsAccount, to: chargedAccount("job"), amount: 300n }
    ])
    // Beyond the hold, postings still name it.
    expect(postings.map((posting) => [posting.hold, posting.owner, posting.segment])).toEqual([[
      "h1",
      "job",
      "Teardown"
    ], ["h1", "job", "Teardown"]])
    expect([ledger.available, ledger.arrears, ledger.charged]).toEqual([0n, 300n, 1_300n])
    expect(ledger.chargesOn("h1")).toEqual({ total: 1_300n, bySegment: bySegment({ Running: 800n, Teardown: 500n }) })
  })

  it("all in arrears when there is no money at all", () => {
    const ledger = new Ledger()
    expect(moves(ledger.capture("c1", T, { hold: undefined, owner: "job", segment: "Boot", amount: 70n }))).toEqual([
      { kind: "Arrears", from: arrearsAccount, to: chargedAccount("job"), amount: 70n }
    ])
    expect([ledger.arrears, ledger.charged, ledger.credits]).toEqual([70n, 70n, 0n])
  })

  it("without a hold, or on one that ended, charges the available balance and names no money held", () => {
    const ledger = setup(1_000n, 600n)
    const loose = ledger.capture("c1", T + 1, { hold: undefined, owner: "job", segment: "Running", amount: 100n })
    expect(moves(loose)).toEqual([{ kind: "Capture", from: availableAccount, to: chargedAccount("job"), amount: 100n }])
    expect(loose[0]?.hold).toBeUndefined()
    expect(ledger.remaining("h1")).toBe(600n)
    ledger.release("release/h1", T + 2, "h1")
    const late = ledger.capture("c2", T + 3, { hold: "h1", owner: "job", segment: "Teardown", amount: 50n })
    expect(late.map((posting) => [posting.kind, posting.from, posting.hold])).toEqual([[
      "Capture",
      availableAccount,
      "h1"
    ]])
    expect(ledger.balance(heldAccount("h1"))).toBe(0n)
    // An unknown hold is charged the same way.
    expect(moves(ledger.capture("c3", T + 4, { hold: "ghost", owner: "job", segment: "Boot", amount: 5n }))).toEqual([
      { kind: "Capture", from: availableAccount, to: chargedAccount("job"), amount: 5n }
    ])
    expect(ledger.chargesOn("ghost").total).toBe(5n)
  })

  it("keeps per-owner and per-hold charges, per segment", () => {
    const ledger = fresh(10_000n)
    held(ledger.hold("hold/a", T, { hold: "ha", owner: "job-a", amount: 1_000n, expiresAt: T + hour }))
    held(ledger.hold("hold/b", T, { hold: "hb", owner: "job-b", amount: 1_000n, expiresAt: T + hour }))
    ledger.capture("c1", T, { hold: "ha", owner: "job-a", segment: "Boot", amount: 100n })
    ledger.capture("c2", T, { hold: "ha", owner: "job-a", segment: "Running", amount: 250n })
    ledger.capture("c3", T, { hold: "hb", owner: "job-b", segment: "Restore", amount: 40n })
    ledger.capture("c4", T, { hold: "ha", owner: "job-a", segment: "Running", amount: 5n })
    ledger.capture("c5", T, { hold: undefined, owner: "job-a", segment: "Teardown", amount: 7n })
    expect(ledger.chargesFor("job-a")).toEqual({
      total: 362n,
      bySegment: bySegment({ Boot: 100n, Running: 255n, Teardown: 7n })
    })
    expect(ledger.chargesFor("job-b")).toEqual({ total: 40n, bySegment: bySegment({ Restore: 40n }) })
    expect(ledger.chargesFor("nobody")).toEqual({ total: 0n, bySegment: bySegment() })
    expect(ledger.chargesOn("ha")).toEqual({ total: 355n, bySegment: bySegment({ Boot: 100n, Running: 255n }) })
    expect(ledger.chargesOn("hb").total).toBe(40n)
    expect(ledger.charged).toBe(402n)
    expect([ledger.heldBy("job-a"), ledger.heldBy("job-b")]).toEqual([645n, 960n])
  })

  it("a zero charge posts nothing", () => {
    const ledger = setup(1_000n, 600n)
    expect(ledger.capture("c0", T, { hold: "h1", owner: "job", segment: "Boot", amount: 0n })).toEqual([])
    expect(ledger.charged).toBe(0n)
  })
})

describe("chargedSince", () => {
  // Charges to one owner at these times (out of order on purpose: a driver may post an earlier instant later).
  const charged = () => {
    const ledger = new Ledger()
    const charges: ReadonlyArray<readonly [number, bigint]> = [[T, 100n], [T + 10, 20n], [T + 10, 3n], [T + 30, 400n], [
      T + 20,
      5_000n
    ], [T - 5, 60_000n]]
    charges.forEach(([at, amount], index) =>
      ledger.capture(`c${index}`, at, { hold: undefined, owner: "job", segment: "Running", amount })
    )
    ledger.capture("other", T, { hold: undefined, owner: "other", segment: "Boot", amount: 7n })
    return ledger
  }
  const cases: ReadonlyArray<readonly [string, number, bigint]> = [
    ["before every charge: all of them", T - 100, 65_523n],
    ["at the earliest (inserted last): all of them", T - 5, 65_523n],
    ["just after it", T - 4, 5_523n],
    ["at T: from T on", T, 5_523n],
    ["at T + 10: the two charges of that instant and later", T + 10, 5_423n],
    ["between instants", T + 11, 5_400n],
    ["at T + 20 (inserted between)", T + 20, 5_400n],
    ["at the last", T + 30, 400n],
    ["after the last: nothing", T + 31, 0n]
  ]
  for (const [label, at, expected] of cases) {
    it(label, () => {
      const ledger = charged()
      expect(ledger.chargedSince("job", at)).toBe(expected)
      expect(Ledger.replay(ledger.postings).chargedSince("job", at)).toBe(expected)
    })
  }

  it("an owner never charged, and arrears count as charges", () => {
    const ledger = charged()
    expect(ledger.chargedSince("nobody", 0)).toBe(0n)
    expect(ledger.chargedSince("other", 0)).toBe(7n)
    expect(ledger.arrears).toBe(ledger.charged)
    expect(ledger.chargedSince("job", 0) + ledger.chargedSince("other", 0)).toBe(ledger.charged)
    expect(ledger.lastSeq).toBe(ledger.postings.length)
  })
})

describe("release", () => {
  it("gives what the hold did not spend back to the available balance: Released", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 600n, expiresAt: T + hour }))
    ledger.capture("c1", T, { hold: "h1", owner: "job", segment: "Running", amount: 250n })
    const postings = ledger.release("release/h1", T + 9, "h1")
    expect(postings).toEqual([{
      seq: 4,
      key: "release/h1#0",
      at: T + 9,
      kind: "Release",
      from: heldAccount("h1"),
      to: availableAccount,
      amount: 350n,
      owner: "job",
      hold: "h1"
    }])
    expect(ledger.holds.get("h1")?.state).toBe("Released")
    expect([
      ledger.available,
      ledger.held,
      ledger.remaining("h1"),
      ledger.heldBy("job"),
      ledger.balance(heldAccount("h1"))
    ]).toEqual([750n, 0n, 0n, 0n, 0n])
    expect([...ledger.openHolds]).toEqual([])
  })

  it("a hold spent to the last micro-USD closes with a zero Release: Captured", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 600n, expiresAt: T + hour }))
    ledger.capture("c1", T, { hold: "h1", owner: "job", segment: "Running", amount: 600n })
    expect(moves(ledger.release("release/h1", T, "h1"))).toEqual([{
      kind: "Release",
      from: heldAccount("h1"),
      to: availableAccount,
      amount: 0n
    }])
    expect(ledger.holds.get("h1")?.state).toBe("Captured")
    expect(ledger.available).toBe(400n)
  })

  it("what comes back pays arrears first", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 1_000n, expiresAt: T + hour }))
    ledger.capture("c1", T, { hold: undefined, owner: "other", segment: "Running", amount: 300n })
    expect(ledger.arrears).toBe(300n)
    expect(moves(ledger.release("release/h1", T, "h1"))).toEqual([
      { kind: "Release", from: heldAccount("h1"), to: availableAccount, amount: 1_000n },
      { kind: "Settle", from: availableAccount, to: arrearsAccount, amount: 300n }
    ])
    expect([ledger.available, ledger.arrears]).toEqual([700n, 0n])
  })

  it("a hold that ended, or never was, releases nothing", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 600n, expiresAt: T + hour }))
    const first = ledger.release("release/h1", T, "h1")
    const before = snapshot(ledger, [heldAccount("h1")])
    expect(ledger.release("release/h1/again", T, "h1")).toEqual([])
    expect(ledger.has("release/h1/again")).toBe(false)
    expect(ledger.release("release/ghost", T, "ghost")).toEqual([])
    expect(ledger.release("release/h1", T, "h1")).toBe(first)
    expect(snapshot(ledger, [heldAccount("h1")])).toEqual(before)
    expect(ledger.holds.get("h1")?.state).toBe("Released")
  })
})

describe("expire", () => {
  it("ends every open hold whose expiry passed, and only those: Expired", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "a", amount: 100n, expiresAt: T + hour }))
    held(ledger.hold("hold/2", T, { hold: "h2", owner: "b", amount: 200n, expiresAt: T + 2 * hour }))
    held(ledger.hold("hold/3", T, { hold: "h3", owner: "c", amount: 300n, expiresAt: T + 3 * hour }))
    ledger.capture("c", T, { hold: "h2", owner: "b", segment: "Running", amount: 200n })
    expect(ledger.expire(T + hour - 1)).toEqual([])
    const postings = ledger.expire(T + 2 * hour)
    expect(postings.map((posting) => [posting.kind, posting.hold, posting.amount, posting.key])).toEqual([
      ["Expire", "h1", 100n, "expire/h1#0"],
      ["Expire", "h2", 0n, "expire/h2#0"]
    ])
    // Spent or not, an expired hold is Expired.
    expect(["h1", "h2", "h3"].map((id) => ledger.holds.get(id)?.state)).toEqual(["Expired", "Expired", "Open"])
    expect([ledger.available, ledger.held, ledger.heldBy("a")]).toEqual([500n, 300n, 0n])
    expect(ledger.expire(T + 2 * hour)).toEqual([])
    expect(ledger.expire(Number.POSITIVE_INFINITY).map((posting) => posting.hold)).toEqual(["h3"])
    expect([ledger.available, ledger.held]).toEqual([800n, 0n])
  })

  it("a hold released before it expired is not expired", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "a", amount: 100n, expiresAt: T + hour }))
    ledger.release("release/h1", T, "h1")
    expect(ledger.expire(T + 5 * hour)).toEqual([])
    expect(ledger.holds.get("h1")?.state).toBe("Released")
  })

  it("follows an expiry moved later", () => {
    const ledger = fresh(1_000n)
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "a", amount: 100n, expiresAt: T + hour }))
    ledger.extendExpiry("h1", T + 3 * hour)
    ledger.extendExpiry("h1", T + 2 * hour)
    expect(ledger.holds.get("h1")?.expiresAt).toBe(T + 3 * hour)
    expect(ledger.expire(T + 2 * hour)).toEqual([])
    expect(ledger.expire(T + 3 * hour).length).toBe(1)
  })
})

describe("keys", () => {
  it("applying a key twice posts nothing the second time and answers the first postings", () => {
    const ledger = fresh(1_000n)
    const accounts = [availableAccount, externalAccount, arrearsAccount, heldAccount("h1"), chargedAccount("job")]
    const twice = <A>(label: string, operation: () => A, postingsOf: (result: A) => ReadonlyArray<Posting>) => {
      const first = operation()
      expect(postingsOf(first).length, label).toBeGreaterThan(0)
      expect(ledger.has(postingsOf(first)[0]!.key.split("#")[0]!), label).toBe(true)
      ledger.drain()
      const before = snapshot(ledger, accounts)
      const again = operation()
      expect(postingsOf(again), label).toEqual(postingsOf(first))
      expect(snapshot(ledger, accounts), label).toEqual(before)
      expect(ledger.drain(), label).toEqual([])
    }
    twice("grant", () => ledger.grant("g", T, 500n, "topup"), (postings) => postings)
    twice("hold", () => ledger.hold("h", T, { hold: "h1", owner: "job", amount: 800n, expiresAt: T + hour }), held)
    twice(
      "capture",
      () => ledger.capture("c", T, { hold: "h1", owner: "job", segment: "Running", amount: 1_000n }),
      (postings) => postings
    )
    twice("refund", () => ledger.refund("r", T, 600n, "topup"), (postings) => postings)
    twice("release", () => ledger.release("rel", T, "h1"), (postings) => postings)
    // A hold retried after it ended answers its first postings rather than refusing the ended hold.
    twice(
      "hold after release",
      () => ledger.hold("h", T, { hold: "h1", owner: "job", amount: 800n, expiresAt: T + hour }),
      held
    )
    expect(ledger.holds.get("h1")?.state).toBe("Captured")
  })

  it("a retry with the same key never charges twice, even when more money arrived meanwhile", () => {
    const ledger = new Ledger()
    ledger.capture("capture/h1/Running/500", T, { hold: undefined, owner: "job", segment: "Running", amount: 500n })
    expect(ledger.arrears).toBe(500n)
    ledger.grant("g", T, 2_000n, "topup")
    ledger.capture("capture/h1/Running/500", T + 1, { hold: undefined, owner: "job", segment: "Running", amount: 500n })
    expect([ledger.charged, ledger.available, ledger.arrears]).toEqual([500n, 1_500n, 0n])
  })
})

describe("drain and retain", () => {
  it("drain answers each new posting once", () => {
    const ledger = new Ledger()
    ledger.grant("g1", T, 100n, "a")
    ledger.grant("g2", T, 100n, "b")
    expect(ledger.drain().map((posting) => posting.key)).toEqual(["g1#0", "g2#0"])
    expect(ledger.drain()).toEqual([])
    ledger.capture("c", T, { hold: undefined, owner: "job", segment: "Boot", amount: 250n })
    ledger.grant("g1", T, 100n, "a")
    expect(ledger.drain().map((posting) => [posting.seq, posting.key])).toEqual([[3, "c#0"], [4, "c#1"]])
    expect(ledger.postings.length).toBe(4)
  })

  it("retain: false keeps sums, holds and keys, but no postings", () => {
    const ledger = new Ledger({ retain: false })
    ledger.grant("g", T, 1_000n, "a")
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job", amount: 600n, expiresAt: T + hour }))
    ledger.capture("c", T, { hold: "h1", owner: "job", segment: "Running", amount: 700n })
    ledger.grant("g", T, 1_000n, "a")
    ledger.release("release/h1", T, "h1")
    expect(ledger.postings).toEqual([])
    expect(ledger.drain()).toEqual([])
    expect([ledger.available, ledger.credits, ledger.charged, ledger.held, ledger.arrears]).toEqual([
      300n,
      1_000n,
      700n,
      0n,
      0n
    ])
    expect(ledger.chargesOn("h1")).toEqual({ total: 700n, bySegment: bySegment({ Running: 700n }) })
    expect(ledger.holds.get("h1")?.state).toBe("Captured")
    expect(ledger.has("g")).toBe(true)
    // The operations still answer their postings, with positions that go on counting.
    expect(ledger.grant("g2", T, 1n, "b").map((posting) => posting.seq)).toEqual([6])
  })
})

describe("replay", () => {
  const history = () => {
    const ledger = new Ledger()
    ledger.grant("g1", T, 1_000n, "starter")
    held(ledger.hold("hold/1", T, { hold: "h1", owner: "job-a", amount: 600n, expiresAt: T + hour }))
    held(ledger.hold("hold/2", T + 1, { hold: "h2", owner: "job-b", amount: 300n, expiresAt: T + 2 * hour }))
    held(ledger.hold("hold/1b", T + 2, { hold: "h1", owner: "job-a", amount: 100n, expiresAt: T + 3 * hour }))
    ledger.capture("c1", T + 3, { hold: "h1", owner: "job-a", segment: "Boot", amount: 700n })
    ledger.capture("c2", T + 4, { hold: "h2", owner: "job-b", segment: "Restore", amount: 500n })
    ledger.release("release/h1", T + 5, "h1")
    ledger.refund("r1", T + 6, 50n, "topup")
    ledger.grant("g2", T + 7, 400n, "topup")
    held(ledger.hold("hold/3", T + 8, { hold: "h3", owner: "job-a", amount: 100n, expiresAt: T + hour }))
    held(ledger.hold("hold/4", T + 8, { hold: "h4", owner: "job-b", amount: 10n, expiresAt: T + 4 * hour }))
    ledger.expire(T + 2 * hour)
    return ledger
  }

  const state = (ledger: Ledger) => ({
    ...snapshot(ledger, [
      externalAccount,
      availableAccount,
      arrearsAccount,
      ...["h1", "h2", "h3", "h4"].map(heldAccount),
      chargedAccount("job-a"),
      chargedAccount("job-b")
    ]),
    holds: [...ledger.holds.values()].map((hold) => ({ ...hold })),
    open: [...ledger.openHolds].map((hold) => hold.id),
    charges: ["job-a", "job-b"].map((owner) => ledger.chargesFor(owner)),
    onHolds: ["h1", "h2", "h3", "h4"].map((hold) => ledger.chargesOn(hold)),
    heldBy: ["job-a", "job-b"].map((owner) => ledger.heldBy(owner)),
    chargedSince: ["job-a", "job-b"].flatMap((owner) =>
      [T + 3, T + 4, T + 5].map((at) => ledger.chargedSince(owner, at))
    )
  })

  it("rebuilds the same balances, holds and charges", () => {
    const original = history()
    const replayed = Ledger.replay(original.postings)
    expect(state(replayed)).toEqual(state(original))
    expect(replayed.postings).toEqual(original.postings)
    expect(state(original)).toMatchObject({
      holds: [
        { id: "h1", state: "Captured", expiresAt: T + 3 * hour },
        { id: "h2", state: "Expired" },
        { id: "h3", state: "Expired" },
        { id: "h4", state: "Open" }
      ],
      arrears: 0n,
      open: ["h4"]
    })
    // What was replayed was persisted already: nothing to drain.
    expect(replayed.drain()).toEqual([])
  })

  it("keeps the keys: a replayed ledger refuses to apply a key again and answers its postings", () => {
    const original = history()
    const replayed = Ledger.replay(original.postings)
    const before = state(replayed)
    expect(replayed.grant("g1", T + 99, 1_000n, "starter")).toEqual(original.grant("g1", T + 99, 1_000n, "starter"))
    expect(replayed.capture("c2", T + 99, { hold: "h2", owner: "job-b", segment: "Restore", amount: 500n })).toEqual(
      original.postings.filter((posting) => posting.key.startsWith("c2#"))
    )
    expect(
      held(replayed.hold("hold/1b", T + 99, { hold: "h1", owner: "job-a", amount: 100n, expiresAt: T + 3 * hour })).map(
        (posting) => posting.key
      )
    ).toEqual(["hold/1b#0"])
    expect(replayed.release("expire/h2", T + 99, "h2", "Expire").map((posting) => posting.kind)).toEqual(["Expire"])
    expect(["g1", "g2", "hold/1", "c1", "release/h1", "r1", "expire/h3"].every((key) => replayed.has(key))).toBe(true)
    expect(state(replayed)).toEqual(before)
    // New work goes on from the last position.
    expect(replayed.grant("g3", T + 100, 1n, "x").map((posting) => posting.seq)).toEqual([original.postings.length + 1])
  })

  it("replays into a ledger that keeps no postings", () => {
    const original = history()
    const replayed = Ledger.replay(original.postings, { retain: false })
    const { postings: _, ...rest } = state(replayed)
    const { postings: __, ...want } = state(original)
    expect(rest).toEqual(want)
    expect(replayed.postings).toEqual([])
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// The property: long random sequences of operations, checked against a model after every one

type Op =
  | { readonly type: "grant"; readonly amount: bigint; readonly dt: number }
  | { readonly type: "refund"; readonly amount: bigint; readonly dt: number }
  | {
    readonly type: "hold"
    readonly slot: number
    readonly fresh: boolean
    readonly owner: number
    readonly amount: bigint
    readonly all: boolean
    readonly window: number
    readonly dt: number
  }
  | {
    readonly type: "capture"
    readonly slot: number
    readonly owner: number
    readonly segment: Segment
    readonly amount: bigint
    readonly dt: number
  }
  | { readonly type: "release"; readonly slot: number; readonly dt: number }
  | { readonly type: "expire"; readonly ahead: number; readonly atExpiryOf: number | undefined; readonly dt: number }
  | { readonly type: "repeat"; readonly pick: number }

const slots = 6
const owners = ["o0", "o1", "o2", "o3"]
const minuteMs = 60_000

const amountArb = (max: bigint) =>
  fc.oneof(
    { weight: 8, arbitrary: fc.bigInt({ min: 1n, max }) },
    { weight: 1, arbitrary: fc.bigInt({ min: 1n, max: 10n }) },
    { weight: 1, arbitrary: fc.bigInt({ min: 1n, max: 10n ** 20n }) }
  )
const dtArb = fc.oneof(fc.constant(0), fc.nat(10 * minuteMs))
const segmentArb = fc.constantFrom(...segments)

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constant("grant" as const), amount: amountArb(200_000n), dt: dtArb }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("refund" as const), amount: amountArb(100_000n), dt: dtArb }) },
  {
    weight: 4,
    arbitrary: fc.record({
      type: fc.constant("hold" as const),
      slot: fc.nat(slots - 1),
      fresh: fc.boolean(),
      owner: fc.nat(owners.length - 1),
      // `all`: exactly the available balance, the edge of a shortfall.
      amount: amountArb(100_000n),
      all: fc.nat(9).map((n) => n === 0),
      window: fc.nat(2 * 60 * minuteMs),
      dt: dtArb
    })
  },
  {
    weight: 6,
    // Slot `slots` is no hold at all.
    arbitrary: fc.record({
      type: fc.constant("capture" as const),
      slot: fc.nat(slots),
      owner: fc.nat(owners.length - 1),
      segment: segmentArb,
      amount: amountArb(60_000n),
      dt: dtArb
    })
  },
  { weight: 2, arbitrary: fc.record({ type: fc.constant("release" as const), slot: fc.nat(slots), dt: dtArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant("expire" as const),
      ahead: fc.integer({ min: -60 * minuteMs, max: 2 * 60 * minuteMs }),
      // Exactly at the expiry of a slot's hold, when there is one.
      atExpiryOf: fc.option(fc.nat(slots - 1), { nil: undefined }),
      dt: dtArb
    })
  },
  { weight: 4, arbitrary: fc.record({ type: fc.constant("repeat" as const), pick: fc.nat() }) }
)

interface ModelHold {
  readonly id: string
  readonly owner: string
  balance: bigint
  state: HoldState
  expiresAt: number
}

/** The rules, kept apart from the ledger: what every balance must be. */
class Model {
  available = 0n
  arrears = 0n
  credits = 0n
  readonly holds = new Map<string, ModelHold>()
  /** The open holds, in the order they opened. */
  readonly open = new Map<string, ModelHold>()
  readonly charges = new Map<string, Record<Segment, bigint>>()
  readonly chargesOnHold = new Map<string, Record<Segment, bigint>>()

  settle() {
    const paid = this.arrears < this.available ? this.arrears : this.available
    this.available -= paid
    this.arrears -= paid
  }

  close(hold: ModelHold, how: "Release" | "Expire") {
    this.available += hold.balance
    hold.state = how === "Expire" ? "Expired" : hold.balance === 0n ? "Captured" : "Released"
    hold.balance = 0n
    this.open.delete(hold.id)
    this.settle()
  }

  charge(owner: string, hold: string | undefined, segment: Segment, amount: bigint) {
    const add = (map: Map<string, Record<Segment, bigint>>, key: string) => {
      let entry = map.get(key)
      if (entry === undefined) map.set(key, entry = bySegment())
      entry[segment] += amount
    }
    add(this.charges, owner)
    if (hold !== undefined) add(this.chargesOnHold, hold)
  }
}

/** One call the runner made, to be made again with the same key and payload. */
interface Call {
  readonly key: string
  readonly invoke: () => ReadonlyArray<Posting>
  readonly first: ReadonlyArray<Posting>
}

const sumCharges = (charges: Charges) => segments.reduce((total, segment) => total + charges.bySegment[segment], 0n)

/**
 * Runs the operations on a ledger and the model, checking after every one. Answers the ledger and how many operations
 * it ran.
 */
const runSequence = (ops: ReadonlyArray<Op>, retain = true): { readonly ledger: Ledger; readonly ran: number } => {
  const ledger = new Ledger({ retain })
  const model = new Model()
  const slotHolds: Array<string | undefined> = Array.from({ length: slots }, () => undefined)
  const calls: Array<Call> = []
  /** Capture and Arrears postings per owner, summed from what was drained. */
  const postedCharges = new Map<string, bigint>()
  const closed = new Set<string>()
  let now = T
  let lastSeq = 0
  let holdCount = 0
  let index = 0

  const fail = (message: string): never => {
    throw new Error(
      `after operation ${index} (${
        JSON.stringify(ops[index], (_k, value: unknown) => typeof value === "bigint" ? `${value}n` : value)
      }): ${message}`
    )
  }
  const same = <A>(actual: A, wanted: A, what: string) => {
    if (actual !== wanted) fail(`${what}: ${String(actual)}, want ${String(wanted)}`)
  }

  /** The new postings (retained ledgers), checked one by one and summed. */
  const absorb = (made: ReadonlyArray<Posting>, keyPrefix: string | undefined): ReadonlyArray<Posting> => {
    const drained = retain ? ledger.drain() : made
    if (retain) same(drained.length, made.length, "drained postings")
    for (const [n, posting] of drained.entries()) {
      if (retain && posting !== made[n]) fail(`drained posting ${posting.seq} is not the one answered`)
      same(posting.seq, lastSeq + 1, "posting seq")
      lastSeq = posting.seq
      if (keyPrefix !== undefined && !posting.key.startsWith(`${keyPrefix}#`)) {
        fail(`posting key ${posting.key} is not of ${keyPrefix}`)
      }
      if (posting.amount < 0n || (posting.amount === 0n && posting.kind !== "Release" && posting.kind !== "Expire")) {
        fail(`posting ${posting.seq} moves ${posting.amount}`)
      }
      if (posting.from === posting.to) fail(`posting ${posting.seq} moves within ${posting.from}`)
      for (const account of [posting.from, posting.to]) {
        if (account.startsWith("held/") && closed.has(account.slice(5))) {
          fail(`posting ${posting.seq} touches ${account}, which ended`)
        }
      }
      if (posting.kind === "Capture" || posting.kind === "Arrears") {
        const owner = posting.owner ?? fail(`charge ${posting.seq} names no owner`)
        same(posting.to, chargedAccount(owner), "charge account")
        postedCharges.set(owner, (postedCharges.get(owner) ?? 0n) + posting.amount)
      }
      if (posting.kind === "Release" || posting.kind === "Expire") {
        const hold = posting.hold ?? fail("a release names no hold")
        same(ledger.balance(heldAccount(hold)), 0n, `${hold}'s account once it ended`)
        closed.add(hold)
      }
    }
    return drained
  }

  const check = () => {
    same(ledger.available, model.available, "available")
    same(ledger.arrears, model.arrears, "arrears")
    same(ledger.credits, model.credits, "credits")
    if (ledger.available < 0n) fail("available is negative")
    if (ledger.arrears < 0n) fail("arrears are negative")
    if (ledger.arrears > 0n && ledger.available > 0n) fail("arrears stay unpaid while money is available")
    let heldSum = 0n
    let openCount = 0
    const heldByOwner = new Map<string, bigint>()
    for (const hold of model.open.values()) {
      const balance = ledger.balance(heldAccount(hold.id))
      same(balance, hold.balance, `${hold.id}'s balance`)
      same(ledger.remaining(hold.id), hold.balance, `${hold.id} remaining`)
      if (balance < 0n) fail(`${hold.id} holds ${balance}`)
      heldSum += balance
      openCount++
      heldByOwner.set(hold.owner, (heldByOwner.get(hold.owner) ?? 0n) + balance)
    }
    same(ledger.held, heldSum, "held")
    same([...ledger.openHolds].length, openCount, "open holds")
    let charged = 0n
    let chargedAccounts = 0n
    for (const owner of owners) {
      const charges = ledger.chargesFor(owner)
      const wanted = model.charges.get(owner) ?? bySegment()
      for (const segment of segments) same(charges.bySegment[segment], wanted[segment], `${owner}'s ${segment} charges`)
      same(charges.total, sumCharges(charges), `${owner}'s total against its segments`)
      if (retain) {
        same(charges.total, postedCharges.get(owner) ?? 0n, `${owner}'s total against its Capture and Arrears postings`)
      }
      same(ledger.heldBy(owner), heldByOwner.get(owner) ?? 0n, `held by ${owner}`)
      same(ledger.chargedSince(owner, Number.NEGATIVE_INFINITY), charges.total, `${owner}'s charges since the start`)
      charged += charges.total
      chargedAccounts += ledger.balance(chargedAccount(owner))
    }
    same(ledger.charged, charged, "charged")
    same(chargedAccounts, charged, "charged accounts")
    // Every account: the ones that ended hold zero (checked as they end, and no posting touches them after).
    const sum = ledger.balance(externalAccount) + ledger.balance(availableAccount) + ledger.balance(arrearsAccount) +
      heldSum + chargedAccounts
    same(sum, 0n, "sum of all balances")
    same(
      ledger.credits,
      ledger.available + ledger.held + ledger.charged - ledger.arrears,
      "credits = available + held + charged − arrears"
    )
  }

  const record = (key: string, invoke: () => ReadonlyArray<Posting>, first: ReadonlyArray<Posting>) => {
    if (first.length > 0) calls.push({ key, invoke, first })
  }

  for (; index < ops.length; index++) {
    const op = ops[index]!
    if (op.type !== "repeat") now += op.dt
    const at = now
    const key = `op/${index}`
    switch (op.type) {
      case "grant": {
        const invoke = () => ledger.grant(key, at, op.amount, "grant")
        const made = invoke()
        model.credits += op.amount
        model.available += op.amount
        model.settle()
        absorb(made, key)
        record(key, invoke, made)
        break
      }
      case "refund": {
        const invoke = () => ledger.refund(key, at, op.amount, "topup")
        const made = invoke()
        const fromAvailable = op.amount < model.available ? op.amount : model.available
        model.credits -= op.amount
        model.available -= fromAvailable
        model.arrears += op.amount - fromAvailable
        absorb(made, key)
        record(key, invoke, made)
        break
      }
      case "hold": {
        const current = slotHolds[op.slot]
        const open = current === undefined ? undefined : model.holds.get(current)
        const extend = !op.fresh && open !== undefined && open.state === "Open"
        const id = extend ? open.id : `h${holdCount}`
        const owner = extend ? open.owner : owners[op.owner]!
        const amount = op.all && model.available > 0n ? model.available : op.amount
        const request = { hold: id, owner, amount, expiresAt: at + op.window }
        const invoke = () => {
          const result = ledger.hold(key, at, request)
          return result._tag === "Held" ? result.postings : []
        }
        const result = ledger.hold(key, at, request)
        if (amount > model.available) {
          if (result._tag === "Held") return fail("a hold beyond the available balance was made")
          same(result.needed, amount, "shortfall needed")
          same(result.available, model.available, "shortfall available")
          absorb([], key)
          if (ledger.has(key)) fail("a shortfall used up its key")
          if (!extend && ledger.holds.has(id)) fail("a shortfall opened a hold")
          break
        }
        const made = held(result)
        same(made.length, 1, "hold postings")
        model.available -= amount
        if (extend) {
          open.balance += amount
          open.expiresAt = Math.max(open.expiresAt, request.expiresAt)
        } else {
          holdCount++
          const opened: ModelHold = { id, owner, balance: amount, state: "Open", expiresAt: request.expiresAt }
          model.holds.set(id, opened)
          model.open.set(id, opened)
          slotHolds[op.slot] = id
        }
        same(ledger.holds.get(id)?.expiresAt, model.holds.get(id)!.expiresAt, `${id}'s expiry`)
        absorb(made, key)
        record(key, invoke, made)
        break
      }
      case "capture": {
        const hold = op.slot === slots ? undefined : slotHolds[op.slot]
        const owner = owners[op.owner]!
        const request = { hold, owner, segment: op.segment, amount: op.amount }
        const modelHold = hold === undefined ? undefined : model.holds.get(hold)
        const holdBefore = modelHold?.state === "Open" ? ledger.balance(heldAccount(modelHold.id)) : 0n
        const availableBefore = ledger.available
        const invoke = () => ledger.capture(key, at, request)
        const made = invoke()
        const holdAfter = modelHold?.state === "Open" ? ledger.balance(heldAccount(modelHold.id)) : 0n
        // Model: the hold, then available, then arrears.
        let left = op.amount
        if (modelHold?.state === "Open") {
          const fromHold = left < modelHold.balance ? left : modelHold.balance
          modelHold.balance -= fromHold
          left -= fromHold
        }
        const fromAvailable = left < model.available ? left : model.available
        model.available -= fromAvailable
        left -= fromAvailable
        model.arrears += left
        model.charge(owner, hold, op.segment, op.amount)
        if (hold !== undefined) {
          const onHold = ledger.chargesOn(hold)
          for (const segment of segments) {
            same(onHold.bySegment[segment], model.chargesOnHold.get(hold)![segment], `${hold}'s ${segment} charges`)
          }
          same(onHold.total, sumCharges(onHold), `${hold}'s total against its segments`)
        }
        // What left held and available money is at most what they had; the rest is exactly the Arrears posting.
        const moved = holdBefore + availableBefore - holdAfter - ledger.available
        if (moved < 0n || moved > holdBefore + availableBefore) {
          fail(`a capture moved ${moved} out of ${holdBefore} held and ${availableBefore} available`)
        }
        const arrearsPosted = made.filter((posting) => posting.kind === "Arrears").reduce(
          (total, posting) => total + posting.amount,
          0n
        )
        same(arrearsPosted, op.amount - moved, "the Arrears posting")
        same(made.reduce((total, posting) => total + posting.amount, 0n), op.amount, "what the capture posted")
        for (const posting of made) {
          if (posting.owner !== owner || posting.segment !== op.segment || posting.hold !== hold) {
            fail(`capture posting ${posting.seq} names ${posting.owner}/${posting.segment}/${posting.hold}`)
          }
        }
        absorb(made, key)
        record(key, invoke, made)
        break
      }
      case "release": {
        const id = op.slot === slots ? "ghost" : slotHolds[op.slot] ?? "ghost"
        const invoke = () => ledger.release(key, at, id)
        const made = invoke()
        const modelHold = model.holds.get(id)
        if (modelHold?.state === "Open") {
          const balance = modelHold.balance
          model.close(modelHold, "Release")
          same(made[0]?.kind, "Release", "release posting")
          same(made[0]?.amount, balance, "released amount")
          same(ledger.holds.get(id)?.state, balance === 0n ? "Captured" : "Released", `${id}'s state`)
        } else {
          same(made.length, 0, "postings of a release of a hold not open")
        }
        absorb(made, key)
        record(key, invoke, made)
        break
      }
      case "expire": {
        const slotHold = op.atExpiryOf === undefined ? undefined : slotHolds[op.atExpiryOf]
        const until = slotHold === undefined ? at + op.ahead : model.holds.get(slotHold)!.expiresAt
        const made = ledger.expire(until)
        let expired = 0
        for (const hold of [...model.open.values()]) {
          if (hold.expiresAt <= until) {
            model.close(hold, "Expire")
            same(ledger.holds.get(hold.id)?.state, "Expired", `${hold.id}'s state`)
            expired++
          }
        }
        same(made.filter((posting) => posting.kind === "Expire").length, expired, "expired holds")
        for (const hold of ledger.openHolds) if (hold.expiresAt <= until) fail(`${hold.id} is open past its expiry`)
        absorb(made, undefined)
        break
      }
      case "repeat": {
        if (calls.length === 0) break
        const call = calls[op.pick % calls.length]!
        const before = snapshot(ledger)
        const again = call.invoke()
        if (again !== call.first) {
          if (again.length !== call.first.length || again.some((posting, n) => posting !== call.first[n])) {
            fail(`retrying ${call.key} answered other postings`)
          }
        }
        const after = snapshot(ledger)
        for (const field of ["available", "arrears", "credits", "held", "charged", "postings"] as const) {
          same(after[field], before[field], `${field} after retrying ${call.key}`)
        }
        absorb([], call.key)
        break
      }
    }
    check()
  }

  // The end: every hold expires, none stays open, and each ended one of the three ways.
  index = ops.length
  const expiredAtEnd = ledger.expire(Number.POSITIVE_INFINITY)
  for (const hold of [...model.open.values()]) model.close(hold, "Expire")
  absorb(expiredAtEnd, undefined)
  check()
  same(ledger.held, 0n, "held at the end")
  same([...ledger.openHolds].length, 0, "open holds at the end")
  for (const hold of ledger.holds.values()) {
    if (hold.state !== "Captured" && hold.state !== "Released" && hold.state !== "Expired") {
      fail(`${hold.id} ended ${hold.state}`)
    }
    same(hold.state, model.holds.get(hold.id)?.state, `${hold.id}'s end`)
    same(ledger.balance(heldAccount(hold.id)), 0n, `${hold.id}'s account at the end`)
  }
  same(ledger.holds.size, model.holds.size, "holds")
  for (const [hold, wanted] of model.chargesOnHold) {
    for (const segment of segments) {
      same(ledger.chargesOn(hold).bySegment[segment], wanted[segment], `${hold}'s ${segment} charges at the end`)
    }
  }
  return { ledger, ran: ops.length }
}

/** Everything replay must rebuild. */
const rebuilt = (ledger: Ledger) => ({
  available: ledger.available,
  arrears: ledger.arrears,
  credits: ledger.credits,
  held: ledger.held,
  charged: ledger.charged,
  holds: [...ledger.holds.values()].map((hold) => ({ ...hold })),
  charges: owners.map((owner) => ledger.chargesFor(owner)),
  onHolds: [...ledger.holds.keys()].map((hold) => ledger.chargesOn(hold))
})

describe("ledger properties", () => {
  it("short sequences: every identity holds after every operation; replay and retain: false agree", () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => {
        const { ledger } = runSequence(ops)
        const replayed = Ledger.replay(ledger.postings)
        expect(rebuilt(replayed)).toEqual(rebuilt(ledger))
        for (const posting of ledger.postings) {
          expect(replayed.has(posting.key.slice(0, posting.key.lastIndexOf("#")))).toBe(true)
        }
        const { ledger: bare } = runSequence(ops, false)
        expect(rebuilt(bare)).toEqual(rebuilt(ledger))
        expect(bare.postings).toEqual([])
      }),
      { numRuns: 500 }
    )
  })

  it("a million operations: balances sum to zero, credits = available + held + charged − arrears, retries never charge twice", () => {
    const numRuns = 200
    const length = 5_000
    let total = 0
    fc.assert(
      fc.property(fc.array(opArb, { minLength: length, maxLength: length }), (ops) => {
        const { ledger, ran } = runSequence(ops)
        total += ran
        const replayed = Ledger.replay(ledger.postings)
        expect(rebuilt(replayed)).toEqual(rebuilt(ledger))
        // Shrinking 5,000 operations takes minutes: the failure names the operation; the short property shrinks.
      }),
      { numRuns, endOnFailure: true }
    )
    expect(total).toBeGreaterThanOrEqual(1_000_000)
  })
})
