/**
 * What the egress proxy lets through (backends/live/EgressProxy.ts): names of the list, and only addresses
 * core/PublicAddress.ts `mayConnectTo` allows — public ones, loopback too in development.
 */
import { describe, expect, it } from "vitest"
import { allowedBy } from "../../../src/backends/live/EgressProxy.ts"
import { mayConnectTo } from "../../../src/core/PublicAddress.ts"

describe("the allow list", () => {
  const allow = ["pypi.org", "*.hf.co"]

  it("lets exact names through, whatever their case or a final dot", () => {
    expect(allowedBy(allow, "pypi.org")).toBe(true)
    expect(allowedBy(allow, "PyPI.org.")).toBe(true)
    expect(allowedBy(allow, "files.pypi.org")).toBe(false)
    expect(allowedBy(allow, "pypi.org.evil.com")).toBe(false)
  })

  it("lets names below a *.suffix through, at any depth, never the suffix itself or a lookalike", () => {
    expect(allowedBy(allow, "cdn.hf.co")).toBe(true)
    expect(allowedBy(allow, "a.b.hf.co")).toBe(true)
    expect(allowedBy(allow, "hf.co")).toBe(false)
    expect(allowedBy(allow, "evilhf.co")).toBe(false)
  })
})

describe("addresses", () => {
  it.each(["10.1.2.3", "172.16.0.1", "192.168.1.1", "127.0.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "::1", "fe80::1", "fd00::1", "::ffff:10.0.0.1", "::ffff:127.0.0.1", "::"])(
    "refuses %s (not public)",
    (address) => expect(mayConnectTo(address, false)).toBe(false)
  )

  it.each(["8.8.8.8", "151.101.0.223", "2606:4700::6810:84e5", "::ffff:8.8.8.8"])("lets %s through", (address) => expect(mayConnectTo(address, false)).toBe(true))

  it("lets loopback through only where development allows it, and nothing else private", () => {
    expect(mayConnectTo("127.0.0.1", true)).toBe(true)
    expect(mayConnectTo("::1", true)).toBe(true)
    expect(mayConnectTo("10.0.0.1", true)).toBe(false)
  })
})
