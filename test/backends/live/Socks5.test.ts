/**
 * The SOCKS5 handshake the egress proxy speaks (src/backends/live/Socks5.ts): bytes in, what they ask, what to answer.
 */
import { describe, expect, it } from "vitest"
import { parseGreeting, parseRequest, reply } from "../../../src/backends/live/Socks5.ts"

const bytes = (...values: ReadonlyArray<number>) => Buffer.from(values)

describe("the greeting", () => {
  it("waits for all of it, then chooses no authentication and keeps what follows", () => {
    expect(parseGreeting(bytes(5))._tag).toBe("More")
    expect(parseGreeting(bytes(5, 2, 0))._tag).toBe("More")
    const done = parseGreeting(bytes(5, 2, 2, 0, 5, 1))
    expect(done).toEqual({ _tag: "Done", value: bytes(5, 0), rest: bytes(5, 1) })
  })

  it("refuses a client that offers only authentication", () => {
    expect(parseGreeting(bytes(5, 1, 2))).toMatchObject({ _tag: "Bad", reply: bytes(5, 0xff) })
  })
})

describe("the request", () => {
  it("reads an IPv4, an IPv6 and a domain target with its port", () => {
    expect(parseRequest(bytes(5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90, 9))).toEqual({
      _tag: "Done",
      value: { host: "127.0.0.1", port: 8080 },
      rest: bytes(9)
    })
    expect(parseRequest(bytes(5, 1, 0, 4, 0xfe, 0x80, ...new Array<number>(13).fill(0), 1, 0, 22))).toMatchObject({
      value: { host: "fe80:0:0:0:0:0:0:1", port: 22 }
    })
    expect(parseRequest(Buffer.concat([bytes(5, 1, 0, 3, 9), Buffer.from("localhost"), bytes(1, 187)]))).toMatchObject({
      value: { host: "localhost", port: 443 }
    })
  })

  it("waits for all of it", () => {
    expect(parseRequest(bytes(5, 1, 0, 1, 127, 0, 0, 1, 0))._tag).toBe("More")
    expect(parseRequest(bytes(5, 1, 0, 3, 9, 108))._tag).toBe("More")
  })

  it("refuses BIND and UDP, and unknown address types, with their reply codes", () => {
    expect(parseRequest(bytes(5, 2, 0, 1, 1, 2, 3, 4, 0, 80))).toMatchObject({ _tag: "Bad", reply: reply(7) })
    expect(parseRequest(bytes(5, 3, 0, 1, 1, 2, 3, 4, 0, 80))).toMatchObject({ _tag: "Bad", reply: reply(7) })
    expect(parseRequest(bytes(5, 1, 0, 9, 1, 2, 3, 4, 0, 80))).toMatchObject({ _tag: "Bad", reply: reply(8) })
  })
})
