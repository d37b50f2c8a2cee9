/**
 * The price bound of a create bound by a dry run's ETag (spec: Create semantics 2, "A create bound by If-Match ... is
 * never placed above estimate.rateUSDPerHour plus 10 %"; property "Estimate price protection"; docs/billing.md,
 * "Price consent"). The bound is the estimated rate plus 10 %, in exact micro-USD. The server writes it on the created
 * Job as an annotation, and whatever places the Job later reads it back and tightens `placement.maxRateUSDPerHour`
 * to it, so no placement, however late, exceeds what the caller consented to. Pure.
 */
import { type JobSpecType } from "../../kinds/job/JobSchema.ts"
import { formatMicroUsd, minMicro, parseMicroUsd, tryParseMicroUsd } from "../Money.ts"

/** The consent covers the estimated rate plus this many tenths of it (spec: "plus 10 %"). */
const headroomTenths = 1n

/**
 * The highest rate a consent to `estimatedMicro` covers: the rate plus 10 %, rounded down to the micro-USD. Rounding
 * down keeps the bound at or below exactly 110 % of the estimate, so the spec's "never above ... plus 10 %" holds
 * for every rate, including ones whose 10 % is not a whole micro-USD.
 */
export const priceBoundOf = (estimatedMicro: bigint): bigint => estimatedMicro + (estimatedMicro * headroomTenths) / 10n

/** The annotation a bound Job carries: `<apiGroup>/price-bound-usd-per-hour`, a decimal USD string. */
export const priceBoundAnnotation = (group: string): string => `${group}/price-bound-usd-per-hour`

/**
 * The bound a Job's annotations carry, or undefined when it carries none. A value that is not a decimal USD amount
 * (the server never writes one, and updates keep what it wrote) is no bound at all, rather than a Job that cannot be
 * placed.
 */
export const priceBoundIn = (
  annotations: Readonly<Record<string, string>> | null | undefined,
  group: string
): bigint | undefined => {
  const text = annotations?.[priceBoundAnnotation(group)]
  return text === undefined ? undefined : tryParseMicroUsd(text)
}

/** The annotations with the bound set (`bound` defined) or removed (undefined): the server alone decides it. */
export const withPriceBoundAnnotation = (
  annotations: Readonly<Record<string, string>> | null | undefined,
  group: string,
  bound: bigint | undefined
): Record<string, string> => {
  const { [priceBoundAnnotation(group)]: _previous, ...rest } = annotations ?? {}
  return bound === undefined ? rest : { ...rest, [priceBoundAnnotation(group)]: formatMicroUsd(bound) }
}

/**
 * The spec a bound Job is placed with: `placement.maxRateUSDPerHour` is the lower of the declared one and the bound.
 */
export const boundedSpec = (spec: JobSpecType, bound: bigint | undefined): JobSpecType => {
  if (bound === undefined) return spec
  const declared = spec.placement.maxRateUSDPerHour
  const effective = declared === undefined ? bound : minMicro(parseMicroUsd(declared), bound)
  return { ...spec, placement: { ...spec.placement, maxRateUSDPerHour: formatMicroUsd(effective) } }
}
