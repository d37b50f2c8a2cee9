/**
 * Where the webhook sender may connect (src/runtime/WebhookTransport.ts; spec: Events, retry rule 3): the SSRF
 * table, every address class refused before anything is sent — IP literals (the ones admission refuses too, checked
 * again here) and names that resolve to them, with a resolver stub rather than the network — and DNS rebinding: the
 * name is resolved on every attempt, and the connection goes to the address that was checked.
 */
import { describe, expect, it } from "vitest"
import { makeTransport, type Resolver } from "../../src/runtime/WebhookTransport.ts"
import { startReceiver } from "../support/WebhookReceiver.ts"

const names: Record<string, ReadonlyArray<string>> = {
  "localtest.me": ["127.0.0.1"],
  "127.0.0.1.nip.io": ["127.0.0.1"],
  "169.254.169.254.nip.io": ["169.254.169.254"],
  "metadata.google.internal.example.com": ["169.254.169.254"],
  "private.example.com": ["10.0.0.7"],
  "v6-loopback.example.com": ["::1"],
  "mapped.example.com": ["::ffff:127.0.0.1"],
  "half-private.example.com": ["93.184.216.34", "192.168.1.1"]
}

const stub: Resolver = async (host) => {
  const addresses = names[host]
  if (addresses === undefined) throw new Error(`getaddrinfo ENOTFOUND ${host}`)
  return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }))
}

const send = (url: string, allowLoopback = false, resolve: Resolver = stub) =>
  makeTransport({ allowLoopback, resolve, timeoutMs: 1_000 }).send({ url, headers: {}, body: "{}" })

const refused = [
  // IP literals: loopback in every form, private, link-local and metadata, documentation, CGNAT, multicast,
  // unspecified.
  "https://127.0.0.1/hook",
  "https://[::1]/hook",
  "https://[::127.0.0.1]/hook",
  "https://[::ffff:127.0.0.1]/hook",
  "https://[64:ff9b::7f00:1]/hook",
  "https://[2002:7f00:1::1]/hook",
  "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
  "https://10.1.2.3/hook",
  "https://172.16.0.1/hook",
  "https://192.168.0.1/hook",
  "https://169.254.169.254/latest/meta-data",
  "https://[fe80::1]/hook",
  "https://[fd00::1]/hook",
  "https://100.64.0.1/hook",
  "https://192.0.0.1/hook",
  "https://192.0.2.1/hook",
  "https://198.51.100.7/hook",
  "https://224.0.0.1/hook",
  "https://[ff02::1]/hook",
  "https://0.0.0.0/hook",
  // Names that resolve to such addresses (one bad address among good ones is enough).
  ...Object.keys(names).map((name) => `https://${name}/hook`)
]

describe("the webhook transport", () => {
  it.each(refused)("refuses %s before sending anything", async (url) => {
    const result = await send(url)
    expect(result._tag).toBe("Refused")
    if (result._tag === "Refused") expect(result.message).toMatch(/not a public address/u)
  })

  it("takes a name that does not resolve (now) as no answer, tried again later", async () => {
    const result = await send("https://nowhere.example.com/hook")
    expect(result).toMatchObject({ _tag: "NoAnswer", message: expect.stringContaining("does not resolve") })
  })

  it("under the development switch takes loopback, and still refuses private and metadata addresses", async () => {
    const receiver = await startReceiver()
    try {
      const result = await send(`https://localtest.me:${receiver.port}/hook`, true)
      expect(result).toMatchObject({ _tag: "Answered", status: 200 })
      expect(receiver.received).toHaveLength(1)
      for (const url of ["https://169.254.169.254.nip.io/", "https://private.example.com/", "https://[fe80::1]/"]) {
        expect((await send(url, true))._tag).toBe("Refused")
      }
    } finally {
      await receiver.close()
    }
  })

  it("sends plain http only to a receiver on loopback under the development switch", async () => {
    const plain = await startReceiver({ http: true })
    try {
      expect(await send(`http://localtest.me:${plain.port}/dev`, true)).toMatchObject({ _tag: "Answered", status: 200 })
      expect((await send(`http://localtest.me:${plain.port}/dev`))._tag).toBe("Refused")
      const publicName: Resolver = async () => [{ address: "93.184.216.34", family: 4 }]
      const refusedHttp = await send("http://hooks.example.com/dev", true, publicName)
      expect(refusedHttp).toMatchObject({ _tag: "Refused", message: expect.stringContaining("must be https") })
      expect(plain.received).toHaveLength(1)
    } finally {
      await plain.close()
    }
  })

  it("resolves the name on every attempt and connects to the address it checked (DNS rebinding reaches nothing)", async () => {
    const receiver = await startReceiver()
    try {
      let calls = 0
      // A public answer first (the receiver stands in for it: loopback is allowed in this test), then the metadata
      // service: the second attempt is refused before any connection.
      const rebinding: Resolver = async () => (++calls === 1
        ? [{ address: "127.0.0.1", family: 4 }]
        : [{ address: "169.254.169.254", family: 4 }])
      const transport = makeTransport({ allowLoopback: true, resolve: rebinding, timeoutMs: 1_000 })
      const url = `https://rebind.example.com:${receiver.port}/hook`
      expect(await transport.send({ url, headers: {}, body: "{}" })).toMatchObject({ _tag: "Answered", status: 200 })
      expect(await transport.send({ url, headers: {}, body: "{}" })).toMatchObject({ _tag: "Refused" })
      expect(calls).toBe(2)
      expect(receiver.received).toHaveLength(1)
    } finally {
      await receiver.close()
    }
  })

  it("counts no answer within the wait as a failure to try again, and follows no redirect", async () => {
    const receiver = await startReceiver()
    try {
      receiver.answer((got) => (got.path === "/slow" ? 0 : 302))
      const slow = await makeTransport({ allowLoopback: true, resolve: stub, timeoutMs: 300 }).send({
        url: `https://localtest.me:${receiver.port}/slow`,
        headers: {},
        body: "{}"
      })
      expect(slow).toMatchObject({ _tag: "NoAnswer", message: expect.stringContaining("no answer within") })
      const redirected = await send(`https://localtest.me:${receiver.port}/moved`, true)
      expect(redirected).toMatchObject({ _tag: "Answered", status: 302 })
      expect(receiver.received.map((got) => got.path)).toEqual(["/slow", "/moved"])
    } finally {
      await receiver.close()
    }
  })
})
