/**
 * A memo of the values made for the last keys, the first made dropped first once it holds `capacity` (a key asked
 * again keeps its place): for pure work made again and again on a few inputs (a spec's durations, a spec's decoding
 * for its estimate). Values may be undefined. Pure: what it answers is what `make` answers.
 */
export const lastValues = <A>(capacity: number) => {
  const values = new Map<string, A>()
  return (key: string, make: () => A): A => {
    if (values.has(key)) return values.get(key) as A
    const value = make()
    if (values.size >= capacity) values.delete(values.keys().next().value!)
    values.set(key, value)
    return value
  }
}
