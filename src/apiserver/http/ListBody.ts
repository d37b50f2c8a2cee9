/**
 * The body of a list without a limit, written as it is read (docs/api-machinery.md, "Lists and watches"): the List or
 * Table up to its array, then each page's elements, then the end. The server holds one page of a list of any length,
 * and the bytes are those JSON.stringify makes of the whole list, which the array being the last member allows.
 */
import { Stream } from "effect"

/** `envelope` with the elements of `pages` in its last member, an empty array in `envelope`: `{…,"items":[]}`. */
export const streamedArray = <A, E>(envelope: object, pages: Stream.Stream<ReadonlyArray<A>, E>): Stream.Stream<Uint8Array, E> =>
  Stream.suspend(() => {
    const whole = JSON.stringify(envelope)
    if (!whole.endsWith("[]}")) throw new Error("a streamed list's array must be the last member of its envelope")
    let separator = ""
    const elements = Stream.map(Stream.filter(pages, (page) => page.length > 0), (page) => {
      const text = separator + page.map((element) => JSON.stringify(element)).join(",")
      separator = ","
      return text
    })
    return Stream.make(whole.slice(0, -"]}".length)).pipe(Stream.concat(elements), Stream.concat(Stream.make("]}")), Stream.encodeText)
  })
