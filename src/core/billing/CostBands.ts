/**
 * Cost bands (spec: Estimate — costUSD and overheadUSD are USDBands {p50, p90}; docs/billing.md, "Estimates"): the
 * p50 and p90 of a cost from sampled runs, in integer micro-USD (no float comes near money here). Two ways:
 *
 * - From the values themselves (`orderStatisticBand`): the nearest-rank p50, and for p90 the order statistic that
 *   bounds the true 90th percentile from above with 95 % confidence. For values that are draws of the whole cost: a
 *   run, or a total drawn over a few of a Job's indexes.
 * - From moments (`normalBand`), for a cost that is a sum of many independent parts — a long run as chunks of work,
 *   a Job of many indexes. The sum is about normal (central limit theorem), corrected for the skew it keeps: p50 is
 *   its median, and p90 is the upper 95 % confidence bound of its 90th percentile, which counts that the mean and σ
 *   are themselves estimated from a few runs.
 *
 * Both bound the 90th percentile from above with the same confidence: a band users read as "covers 90 % of runs"
 * must not fall below it half the time, as a plain sample p90 does.
 */

/** A cost's p50 and p90, micro-USD. */
export interface Band {
  readonly p50: bigint
  readonly p90: bigint
}

/** A ratio of integers (no floats near money). */
export interface Ratio {
  readonly numerator: bigint
  readonly denominator: bigint
}

/** z of the standard normal's 90th percentile, 1.2816. */
export const z90: Ratio = { numerator: 12816n, denominator: 10000n }

/** z of a one-sided 95 % confidence bound, 1.645 (the rank of `orderStatisticBand` uses the same number). */
export const z95: Ratio = { numerator: 1645n, denominator: 1000n }

/** Nearest-rank percentile of sorted values. */
export const percentile = <A>(sorted: ReadonlyArray<A>, p: number): A =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!

export const bigintOrder = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * The p50 of the values, and for p90 the order statistic at rank n·0.9 + z₉₅·√(n·0.9·0.1) (normal approximation of
 * the binomial). `runs` is the number of independent runs behind the values: totals drawn from them know no more than
 * the runs do. Sorts `values` in place.
 */
export const orderStatisticBand = (values: Array<bigint>, runs: number): Band => {
  values.sort(bigintOrder)
  // A rank, not money: the float stays away from the amounts, which are picked, never computed.
  const z = Number(z95.numerator) / Number(z95.denominator)
  const upper = Math.min(1, (runs * 0.9 + z * Math.sqrt(runs * 0.9 * 0.1)) / runs)
  return { p50: percentile(values, 0.5), p90: percentile(values, upper) }
}

// ---------------------------------------------------------------------------------------------------------------------
// Integer arithmetic

/** ⌈a / b⌉ for b > 0. */
export const ceilDiv = (a: bigint, b: bigint): bigint => (a >= 0n ? (a + b - 1n) / b : -(-a / b))

/** a / b rounded half up, for b > 0. */
const roundDiv = (a: bigint, b: bigint): bigint => (a >= 0n ? (2n * a + b) / (2n * b) : -((-2n * a + b) / (2n * b)))

/** ⌈√value⌉ of a non-negative integer (Newton's method on bigints). */
export const isqrtCeil = (value: bigint): bigint => {
  if (value < 0n) throw new Error(`isqrtCeil of a negative number: ${value}`)
  if (value < 2n) return value
  // Start above the root (2^⌈bits/2⌉) and step down: x ← (x + value/x)/2 decreases until it reaches ⌊√value⌋.
  let root = 1n << BigInt(Math.ceil(value.toString(2).length / 2))
  for (;;) {
    const next = (root + value / root) / 2n
    if (next >= root) break
    root = next
  }
  return root * root === value ? root : root + 1n
}

const times = (value: bigint, ratio: Ratio): bigint => ceilDiv(value * ratio.numerator, ratio.denominator)

// ---------------------------------------------------------------------------------------------------------------------
// Normal approximation

/**
 * A cost estimated from its moments, micro-USD: mean, variance and third central moment (how skewed it is), and the
 * variance of the mean's own estimate.
 */
export interface NormalEstimate {
  readonly mean: bigint
  /** micro-USD². */
  readonly variance: bigint
  /** micro-USD³: a run's costs are skewed to the right (an interruption adds a restore, none takes one away). */
  readonly thirdMoment: bigint
  /** micro-USD²: how far the estimated mean may be off (the squared standard error). */
  readonly meanVariance: bigint
  /** micro-USD⁴: how far the estimated variance may be off (skewed runs make it wider than a normal's). */
  readonly varianceVariance: bigint
}

/** The power sums of values: n, Σv, Σv², Σv³, Σv⁴. */
const powerSums = (values: ReadonlyArray<bigint>) => {
  let sum = 0n
  let squares = 0n
  let cubes = 0n
  let fourths = 0n
  for (const value of values) {
    const square = value * value
    sum += value
    squares += square
    cubes += square * value
    fourths += square * square
  }
  return { n: BigInt(values.length), sum, squares, cubes, fourths }
}

type PowerSums = ReturnType<typeof powerSums>

/** n·Σv² − (Σv)²: the sample variance times n·(n − 1). */
const spreadOf = ({ n, sum, squares }: PowerSums): bigint => n * squares - sum * sum

/** n²·Σv³ − 3n·Σv·Σv² + 2(Σv)³: the unbiased third moment times n·(n − 1)·(n − 2). */
const skewOf = ({ n, sum, squares, cubes }: PowerSums): bigint =>
  n * n * cubes - 3n * n * sum * squares + 2n * sum * sum * sum

/**
 * The variance of the sample variance, (m₄ − s⁴·(n − 3)/(n − 1))/n, where m₄ = Σ(v − v̄)⁴/n is
 * (n³·Σv⁴ − 4n²·Σv·Σv³ + 6n·(Σv)²·Σv² − 3(Σv)⁴)/n⁴; over the common denominator n⁵·(n − 1)³.
 */
const varianceVarianceOf = (sums: PowerSums): bigint => {
  const { n, sum, squares, cubes, fourths } = sums
  const central = n * n * n * fourths - 4n * n * n * sum * cubes + 6n * n * sum * sum * squares -
    3n * sum * sum * sum * sum
  const spread = spreadOf(sums)
  const numerator = central * (n - 1n) ** 3n - spread * spread * (n - 3n) * n * n
  return numerator <= 0n ? 0n : ceilDiv(numerator, n ** 5n * (n - 1n) ** 3n)
}

/**
 * One run of `first + (extraMs / chunkMs) · steady` per sample: a run sampled for `chunkMs` of work (`first`), then
 * extended to `chunkMs + extraMs` of work by independent steady chunks like it (`steady`: the sample without what a
 * run pays once, its first boot and its last teardown). Means, variances and third moments add over independent
 * chunks; a fraction of a chunk counts as its share. With no extra work it is the sampled runs' own moments. The
 * errors of the variances of the first and the steady chunks (paired samples of one run) are taken as fully
 * correlated: their standard deviations add.
 */
export const chunkedRunEstimate = (
  first: ReadonlyArray<bigint>,
  steady: ReadonlyArray<bigint>,
  extraMs: number,
  chunkMs: number
): NormalEstimate => {
  const n = BigInt(first.length)
  if (n < 3n || steady.length !== first.length) {
    throw new Error(`chunkedRunEstimate needs three or more paired samples, got ${first.length} and ${steady.length}`)
  }
  const extra = BigInt(extraMs)
  const chunk = BigInt(chunkMs)
  const x = powerSums(first)
  const y = powerSums(steady)
  // Each sample's total, times chunkMs: its first chunk and its share of the steady ones (for the mean's error).
  const z = powerSums(first.map((value, index) => chunk * value + extra * steady[index]!))
  const pairs = n * (n - 1n)
  return {
    mean: roundDiv(z.sum, n * chunk),
    variance: ceilDiv(chunk * spreadOf(x) + extra * spreadOf(y), chunk * pairs),
    thirdMoment: roundDiv(chunk * skewOf(x) + extra * skewOf(y), chunk * pairs * (n - 2n)),
    meanVariance: ceilDiv(spreadOf(z), chunk * chunk * pairs * n),
    varianceVariance: ceilDiv(
      (chunk * isqrtCeil(varianceVarianceOf(x)) + extra * isqrtCeil(varianceVarianceOf(y))) ** 2n,
      chunk * chunk
    )
  }
}

/**
 * The sum of `count` independent draws of `part`: the moments add; the errors of the mean and of the variance, both
 * estimated once for every draw, grow `count` fold.
 */
export const sumOf = (part: NormalEstimate, count: number): NormalEstimate => {
  const c = BigInt(count)
  return {
    mean: part.mean * c,
    variance: part.variance * c,
    thirdMoment: part.thirdMoment * c,
    meanVariance: part.meanVariance * c * c,
    varianceVariance: part.varianceVariance * c * c
  }
}

/** (z₉₀² − 1), the Cornish–Fisher weight of the skew at the 90th percentile (it is −1 at the median). */
const skewWeight90: Ratio = {
  numerator: z90.numerator * z90.numerator - z90.denominator * z90.denominator,
  denominator: z90.denominator * z90.denominator
}

/**
 * The band of an about-normal cost, with the first Cornish–Fisher correction for its skew γ (a sum of few chunks of
 * a right-skewed run is still skewed): the p-quantile is μ + σ·(z + (z² − 1)·γ/6), and σ·γ/6 is κ₃/(6σ²). So
 * p50 = μ − κ₃/(6σ²), and p90 = μ + z₉₀·σ + (z₉₀² − 1)·κ₃/(6σ²) + z₉₅·SE, an upper 95 % confidence bound. SE is
 * the standard error of μ + z₉₀·σ: √Var(μ̂) + z₉₀·√Var(σ̂), with Var(σ̂) ≈ Var(σ̂²)/(4σ²) (delta method). The two
 * errors add rather than in quadrature because they go together: runs that happened to be interrupted less have
 * both a lower mean and a lower spread. p90 rounds up.
 */
export const normalBand = (estimate: NormalEstimate): Band => {
  const skew = estimate.variance === 0n ? 0n : 6n * estimate.variance
  const shift = (
    weight: Ratio
  ): bigint => (skew === 0n ? 0n : ceilDiv(estimate.thirdMoment * weight.numerator, skew * weight.denominator))
  const sigmaVariance = estimate.variance === 0n ? 0n : ceilDiv(estimate.varianceVariance, 4n * estimate.variance)
  const standardError = isqrtCeil(estimate.meanVariance) + times(isqrtCeil(sigmaVariance), z90)
  const p50 = estimate.mean - shift({ numerator: 1n, denominator: 1n })
  const p90 = estimate.mean + times(isqrtCeil(estimate.variance), z90) + shift(skewWeight90) + times(standardError, z95)
  const floor = p50 < 0n ? 0n : p50
  return { p50: floor, p90: p90 < floor ? floor : p90 }
}
