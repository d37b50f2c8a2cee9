/**
 * The simulator's randomness: one seeded generator per component, each drawn from the scenario seed and the
 * component's name (issue: "a seeded PRNG from which every component draws its own sub-seed"). Adding a component
 * or drawing more numbers in one never shifts the numbers another component sees, so traces stay comparable across
 * scenario edits. The generator is seedrandom's Alea: fast, and the same sequence on every platform.
 */
import seedrandom from "seedrandom"

export class Prng {
  readonly seed: string
  private readonly next: () => number

  constructor(seed: string) {
    this.seed = seed
    this.next = seedrandom.alea(seed)
  }

  /** A generator for a named component, independent of every other name. */
  derive(name: string): Prng {
    return new Prng(`${this.seed}/${name}`)
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    return this.next()
  }

  /** Uniform integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return p > 0 && this.next() < p
  }

  /** Exponentially distributed with the given mean. */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean
  }

  /** Log-normal with the given median and the spread of the log (sigma); boot times and durations are skewed right. */
  logNormal(median: number, sigma: number): number {
    // Box-Muller; the second variate is discarded to keep one draw per sample simple to reason about.
    const u = 1 - this.next()
    const v = this.next()
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v)
    return median * Math.exp(sigma * z)
  }

  /** One element, uniformly. */
  pick<A>(items: ReadonlyArray<A>): A {
    return items[Math.floor(this.next() * items.length)]!
  }
}
