/** Which addresses are public (core/PublicAddress.ts), with the address classes the webhooks issue names. */
import { describe, expect, it } from "vitest"
import {
  inRange,
  isLoopbackAddress,
  isPublicAddress,
  loopbackRanges,
  mayConnectTo,
  parseAddress,
  parseRange,
  publicOnly
} from "../../src/core/PublicAddress.ts"

describe("public addresses", () => {
  it("refuses every class that leads to the host, its network or a metadata service", () => {
    const notPublic = [
      "0.0.0.0",
      "10.1.2.3",
      "100.64.0.1",
      "127.0.0.1",
      "127.255.255.254",
      "169.254.169.254",
      "172.16.0.1",
      "172.31.255.255",
      "192.0.0.1",
      "192.0.2.1",
      "192.88.99.1",
      "192.168.1.1",
      "198.18.0.1",
      "198.51.100.7",
      "203.0.113.9",
      "224.0.0.1",
      "239.255.255.250",
      "240.0.0.1",
      "255.255.255.255",
      "::",
      "::1",
      "::127.0.0.1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::ffff:169.254.169.254",
      "64:ff9b::7f00:1",
      "64:ff9b::a9fe:a9fe",
      "64:ff9b:1::1",
      "2002:7f00:1::1",
      "2002:a9fe:a9fe::1",
      "2001::1",
      "2001:db8::1",
      "100::1",
      "fc00::1",
      "fd12:3456::1",
      "fe80::1",
      "fec0::1",
      "ff02::1",
      "fd00:ec2::254"
    ]
    for (const address of notPublic) expect(isPublicAddress(address), address).toBe(false)
  })

  it("lets public addresses through, IPv6 forms of public IPv4 ones included", () => {
    const publicOnes = [
      "8.8.8.8",
      "1.1.1.1",
      "93.184.216.34",
      "2606:4700:4700::1111",
      "2a00:1450:4001::200e",
      "::ffff:8.8.8.8",
      "64:ff9b::808:808",
      "2002:808:808::1"
    ]
    for (const address of publicOnes) expect(isPublicAddress(address), address).toBe(true)
  })

  it("parses only IP literals: names, zones and malformed text are not addresses (and so not public)", () => {
    for (
      const text of [
        "localhost",
        "127.0.0.1.nip.io",
        "fe80::1%eth0",
        "1.2.3",
        "01.2.3.4",
        "1:2:3:4:5:6:7:8:9",
        "::1::",
        "256.0.0.1",
        ""
      ]
    ) {
      expect(parseAddress(text), text).toBeUndefined()
      expect(isPublicAddress(text), text).toBe(false)
    }
    expect(parseAddress("1:2:3:4:5:6:7:8")).toEqual({ family: 6, value: 0x0001_0002_0003_0004_0005_0006_0007_0008n })
    expect(parseAddress("::ffff:1.2.3.4")).toEqual({ family: 6, value: 0xffff_0102_0304n })
  })

  it("knows loopback, in either family", () => {
    for (const address of ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"]) {
      expect(isLoopbackAddress(address), address).toBe(true)
    }
    for (const address of ["128.0.0.1", "::2", "10.0.0.1"]) expect(isLoopbackAddress(address), address).toBe(false)
  })
})

describe("address ranges (an operator's --egress-allow-cidr)", () => {
  it("parse CIDR text and bare addresses, and nothing else", () => {
    expect(parseRange("127.0.0.1/32")).toEqual({ family: 4, base: 0x7f00_0001n, prefix: 32 })
    expect(parseRange("10.0.0.0/8")).toEqual({ family: 4, base: 0x0a00_0000n, prefix: 8 })
    expect(parseRange("::1")).toEqual({ family: 6, base: 1n, prefix: 128 })
    for (
      const text of [
        "localhost",
        "10.0.0.0/33",
        "::/129",
        "10.0.0.0/",
        "10.0.0.0/8/8",
        "10.0.0.0/-1",
        "10.0.0.0/08x",
        ""
      ]
    ) expect(parseRange(text), text).toBeUndefined()
  })

  it("hold the addresses under their prefix, an IPv4 address carried in IPv6 mapped form included", () => {
    const ten = parseRange("10.1.0.0/16")!
    for (const address of ["10.1.0.0", "10.1.255.255", "::ffff:10.1.2.3"]) {
      expect(inRange(address, ten), address).toBe(true)
    }
    for (const address of ["10.2.0.0", "10.0.255.255", "::a01:203", "fd00::1", "name"]) {
      expect(inRange(address, ten), address).toBe(false)
    }
    expect(inRange("fd00::1234", parseRange("fd00::/8")!)).toBe(true)
    expect(inRange("fe00::1", parseRange("fd00::/8")!)).toBe(false)
    expect(inRange("1.2.3.4", parseRange("0.0.0.0/0")!)).toBe(true)
  })
})

describe("mayConnectTo", () => {
  const metadataAndPrivate = [
    "169.254.169.254",
    "fd00:ec2::254",
    "169.254.170.2",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.0.1",
    "100.100.100.200",
    "127.0.0.1",
    "::1",
    "fe80::1",
    "0.0.0.0",
    "::ffff:169.254.169.254"
  ]

  it("refuses link-local (cloud metadata), private, CGNAT, loopback and unspecified addresses under the public rule", () => {
    for (const address of metadataAndPrivate) expect(mayConnectTo(address, publicOnly), address).toBe(false)
    expect(mayConnectTo("8.8.8.8", publicOnly)).toBe(true)
  })

  it("lets exactly an operator's ranges through besides public addresses", () => {
    const rules = { exceptions: [parseRange("127.0.0.1/32")!, parseRange("10.9.0.0/16")!] }
    expect(mayConnectTo("127.0.0.1", rules)).toBe(true)
    expect(mayConnectTo("::ffff:127.0.0.1", rules)).toBe(true)
    expect(mayConnectTo("10.9.8.7", rules)).toBe(true)
    for (const address of ["127.0.0.2", "::1", "10.8.0.1", "169.254.169.254"]) {
      expect(mayConnectTo(address, rules), address).toBe(false)
    }
    expect(mayConnectTo("::1", { exceptions: loopbackRanges })).toBe(true)
  })

  it("refuses the host's own addresses even when public, unless an operator names them", () => {
    const own = ["203.0.114.7", "2a00:1450::7", "127.0.0.1"]
    expect(mayConnectTo("203.0.114.7", { exceptions: [], own })).toBe(false)
    expect(mayConnectTo("::ffff:203.0.114.7", { exceptions: [], own })).toBe(false)
    expect(mayConnectTo("2a00:1450:0::7", { exceptions: [], own })).toBe(false)
    expect(mayConnectTo("203.0.114.8", { exceptions: [], own })).toBe(true)
    expect(mayConnectTo("203.0.114.7", { exceptions: [parseRange("203.0.114.7")!], own })).toBe(true)
  })
})
