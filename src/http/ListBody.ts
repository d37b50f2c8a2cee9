/**
 * The body of a list (docs/api-machinery.md, "Lists and watches"): the List or Table up to its array, then the
 * elements, then the end — the bytes JSON.stringify makes of the whole list, which the array being the last member
 * allows. A list without a limit is written as it is read, a page at a time, so the server holds one page of a list
 * of any length; a list of stored objects that needs nothing of them carries their stored JSON texts as they are.
 */
import { Stream } from "effect"

/** `envelope` as JSON, cut before the end of its last member, an empty array: `{…,"items":[` and `]}`. */
const split = (envelope: object): readonly [string, string] => {
  const whole = JSON.stringify(envelope)
  if (!whole.endsWith("[]}")) throw new Error("a list's array must be the last member of its envelope")
  return [whole.slice(0, -"]}".length), "]}"]
}

/** `envelope` with the JSON texts `texts` as the elements of its last member. */
export const withTexts = (envelope: object, texts: ReadonlyArray<string>): string => {
  const [head, tail] = split(envelope)
  return head + texts.join(",") + tail
}

/** `envelope` with the JSON texts of `pages` as the elements of its last member, written page by page. */
export const streamedTexts = <E>(
  envelope: object,
  pages: Stream.Stream<ReadonlyArray<string>, E>
): Stream.Stream<Uint8Array, E> =>
  Stream.suspend(() => {
    const [head, tail] = split(envelope)
    let separator = ""
    const elements = Stream.map(Stream.filter(pages, (page) => page.length > 0), (page) => {
      const text = separator + page.join(",")
      separator = ","
      return text
    })
    return Stream.make(head).pipe(Stream.concat(elements), Stream.concat(Stream.make(tail)), Stream.encodeText)
  })

/** `envelope` with the elements of `pages` in its last member, an empty array in `envelope`: `{…,"items":[]}`. */
export const streamedArray = <A, E>(
  envelope: object,
  pages: Stream.Stream<ReadonlyArray<A>, E>
): Stream.Stream<Uint8Array, E> =>
  streamedTexts(envelope, Stream.map(pages, (page) => page.map((element) => JSON.stringify(element))))
