/**
 * The organization's account as billing events see it (spec: Events — billing.low_balance "available balance fell
 * below the warning level", billing.arrears_posted "a charge exceeded the balance; new work waits until paid"). These
 * events are about the account, not about one object, so they are derived from the ledger's balances before and after
 * each ledger operation, whatever made it (a charge, a hold, a refund).
 *
 * Pure: amounts in micro-USD.
 */
import { formatMicroUsd } from "../Money.ts"
import type { Ledger } from "./Ledger.ts"

/** The warning level of billing.low_balance: 10 USD of available balance (nodus; docs/billing.md, "Account events"). */
export const lowBalanceWarningMicro = 10_000_000n

export interface AccountBalances {
  readonly available: bigint
  readonly held: bigint
  readonly arrears: bigint
}

export const balancesOf = (ledger: Ledger): AccountBalances => ({
  available: ledger.available,
  held: ledger.held,
  arrears: ledger.arrears
})

export interface AccountEvent {
  /** The spec's event type. */
  readonly type: "billing.low_balance" | "billing.arrears_posted"
  readonly reason: "LowBalance" | "ArrearsPosted"
  readonly message: string
}

/**
 * The account events between two readings: low_balance when the available balance goes from at or above the warning
 * level to below it (once per fall; it re-arms when credits lift it back), arrears_posted when more is owed than
 * before.
 */
export const accountEventsOf = (
  before: AccountBalances,
  after: AccountBalances,
  level: bigint = lowBalanceWarningMicro
): ReadonlyArray<AccountEvent> => {
  const events: Array<AccountEvent> = []
  if (before.available >= level && after.available < level) {
    events.push({
      type: "billing.low_balance",
      reason: "LowBalance",
      message: `The available balance is ${formatMicroUsd(after.available)} USD, below the warning level of ${
        formatMicroUsd(level)
      } USD (${formatMicroUsd(after.held)} USD held by running work). Add credits with a TopUp.`
    })
  }
  if (after.arrears > before.arrears) {
    events.push({
      type: "billing.arrears_posted",
      reason: "ArrearsPosted",
      message: `${formatMicroUsd(after.arrears - before.arrears)} USD of charges exceeded the balance; ${
        formatMicroUsd(after.arrears)
      } USD is owed, and new work waits until it is paid. Add credits with a TopUp; they pay the arrears first.`
    })
  }
  return events
}
