// Table tests for the DER encoder against hand-checked encodings from X.690 and RFC 5280,
// so that a mistake in the encoder cannot hide behind a matching mistake in a parser.

import { assert, describe, it } from "@effect/vitest"
import * as Der from "../../../src/apiserver/tls/Der.ts"

/** One row: a label, the encoder's output and the expected encoding in hexadecimal. */
type Row = readonly [label: string, actual: () => Uint8Array, expectedHex: string]

/** Registers one test per row comparing the encoding with the expected hex. */
const table = (rows: ReadonlyArray<Row>): void => {
  for (const [label, actual, expectedHex] of rows) {
    it(label, () => {
      assert.strictEqual(Buffer.from(actual()).toString("hex"), expectedHex.replaceAll(" ", ""))
    })
  }
}

/** Hex of an ASCII string, to keep time and string rows readable. */
const asciiHex = (text: string): string => Buffer.from(text, "latin1").toString("hex")

describe("Der.integer", () => {
  table([
    ["0", () => Der.integer(0n), "02 01 00"],
    ["127", () => Der.integer(127n), "02 01 7f"],
    ["128 gains a leading zero", () => Der.integer(128n), "02 02 00 80"],
    ["256", () => Der.integer(256n), "02 02 01 00"],
    ["2 (certificate version 3)", () => Der.integer(2n), "02 01 02"],
    ["-1", () => Der.integer(-1n), "02 01 ff"],
    ["-128", () => Der.integer(-128n), "02 01 80"],
    ["-129", () => Der.integer(-129n), "02 02 ff 7f"],
    ["2^64", () => Der.integer(1n << 64n), "02 09 01 00 00 00 00 00 00 00 00"],
    ["bytes drop redundant leading zeros", () => Der.integer(Uint8Array.of(0, 0, 1)), "02 01 01"],
    ["bytes keep one zero before a set top bit", () => Der.integer(Uint8Array.of(0, 0, 0x80)), "02 02 00 80"],
    ["bytes gain a zero before a set top bit", () => Der.integer(Uint8Array.of(0xff, 0x01)), "02 03 00 ff 01"],
    ["all-zero bytes are 0", () => Der.integer(Uint8Array.of(0, 0)), "02 01 00"],
    ["empty bytes are 0", () => Der.integer(new Uint8Array(0)), "02 01 00"]
  ])
})

describe("Der.objectIdentifier", () => {
  table([
    ["ecdsa-with-SHA256", () => Der.objectIdentifier("1.2.840.10045.4.3.2"), "06 08 2a 86 48 ce 3d 04 03 02"],
    ["commonName", () => Der.objectIdentifier("2.5.4.3"), "06 03 55 04 03"],
    ["serverAuth", () => Der.objectIdentifier("1.3.6.1.5.5.7.3.1"), "06 08 2b 06 01 05 05 07 03 01"],
    ["prime256v1", () => Der.objectIdentifier("1.2.840.10045.3.1.7"), "06 08 2a 86 48 ce 3d 03 01 07"],
    [
      "second arc above 39 under joint-iso-itu-t (X.690 8.19.5)",
      () => Der.objectIdentifier("2.999.3"),
      "06 03 88 37 03"
    ]
  ])

  for (const malformed of ["1", "3.1", "1.40", "1.2.x", "1..2", "1.02", ""]) {
    it(`rejects "${malformed}"`, () => {
      assert.throws(() => Der.objectIdentifier(malformed), RangeError)
    })
  }
})

describe("Der lengths", () => {
  table([
    ["127 content octets use the short form", () => Der.octetString(new Uint8Array(127)).subarray(0, 2), "04 7f"],
    ["128 content octets use 0x81", () => Der.octetString(new Uint8Array(128)).subarray(0, 3), "04 81 80"],
    ["255 content octets use 0x81", () => Der.octetString(new Uint8Array(255)).subarray(0, 3), "04 81 ff"],
    ["256 content octets use 0x82", () => Der.octetString(new Uint8Array(256)).subarray(0, 4), "04 82 01 00"],
    ["65535 content octets use 0x82", () => Der.encodeLength(65535), "82 ff ff"],
    ["65536 content octets use 0x83", () => Der.encodeLength(65536), "83 01 00 00"],
    ["zero length", () => Der.encodeLength(0), "00"]
  ])

  it("total length of a long-form element is header plus contents", () => {
    assert.strictEqual(Der.octetString(new Uint8Array(300)).length, 4 + 300)
  })

  it("rejects negative lengths", () => {
    assert.throws(() => Der.encodeLength(-1), RangeError)
  })
})

describe("Der times", () => {
  const endOf2049 = new Date(Date.UTC(2049, 11, 31, 23, 59, 59, 999))
  const startOf2050 = new Date(Date.UTC(2050, 0, 1, 0, 0, 0))
  const startOf1950 = new Date(Date.UTC(1950, 0, 1, 0, 0, 0))
  const endOf1949 = new Date(Date.UTC(1949, 11, 31, 23, 59, 59))

  table([
    ["UTCTime drops milliseconds", () => Der.utcTime(endOf2049), "17 0d" + asciiHex("491231235959Z")],
    ["time() in 2049 is UTCTime", () => Der.time(endOf2049), "17 0d" + asciiHex("491231235959Z")],
    ["time() in 2050 is GeneralizedTime", () => Der.time(startOf2050), "18 0f" + asciiHex("20500101000000Z")],
    ["time() in 1950 is UTCTime", () => Der.time(startOf1950), "17 0d" + asciiHex("500101000000Z")],
    ["time() in 1949 is GeneralizedTime", () => Der.time(endOf1949), "18 0f" + asciiHex("19491231235959Z")],
    [
      "GeneralizedTime pads the year",
      () => Der.generalizedTime(new Date(Date.UTC(2024, 1, 29, 7, 5, 3))),
      "18 0f" + asciiHex("20240229070503Z")
    ]
  ])

  it("UTCTime refuses years it cannot represent", () => {
    assert.throws(() => Der.utcTime(startOf2050), RangeError)
    assert.throws(() => Der.utcTime(endOf1949), RangeError)
  })

  it("refuses an invalid Date", () => {
    assert.throws(() => Der.time(new Date(Number.NaN)), RangeError)
  })
})

describe("Der bit strings", () => {
  table([
    ["whole octets", () => Der.bitString(Uint8Array.of(0x01, 0x02)), "03 03 00 01 02"],
    ["explicit unused bits", () => Der.bitString(Uint8Array.of(0x80), 7), "03 02 07 80"],
    ["empty", () => Der.bitString(new Uint8Array(0)), "03 01 00"],
    ["keyCertSign and cRLSign drop the trailing zero bit", () => Der.namedBitString([5, 6]), "03 02 01 06"],
    ["digitalSignature alone", () => Der.namedBitString([0]), "03 02 07 80"],
    ["digitalSignature and keyEncipherment", () => Der.namedBitString([0, 2]), "03 02 05 a0"],
    ["decipherOnly spills into a second octet", () => Der.namedBitString([8]), "03 03 07 00 80"],
    ["no named bits", () => Der.namedBitString([]), "03 01 00"]
  ])

  it("rejects more than seven unused bits", () => {
    assert.throws(() => Der.bitString(Uint8Array.of(0), 8), RangeError)
  })
})

describe("Der simple types", () => {
  table([
    ["BOOLEAN TRUE", () => Der.boolean(true), "01 01 ff"],
    ["BOOLEAN FALSE", () => Der.boolean(false), "01 01 00"],
    ["NULL", () => Der.nullValue(), "05 00"],
    ["OCTET STRING", () => Der.octetString(Uint8Array.of(0xde, 0xad)), "04 02 de ad"],
    ["UTF8String", () => Der.utf8String("é"), "0c 02 c3 a9"],
    ["PrintableString", () => Der.printableString("Ab 1"), "13 04 41 62 20 31"]
  ])

  it("PrintableString refuses characters outside its alphabet", () => {
    assert.throws(() => Der.printableString("a@b"), RangeError)
  })
})

describe("Der constructed and tagged types", () => {
  table([
    ["empty SEQUENCE", () => Der.sequence([]), "30 00"],
    ["SEQUENCE keeps order", () => Der.sequence([Der.integer(2n), Der.integer(1n)]), "30 06 02 01 02 02 01 01"],
    ["SET OF sorts its components", () => Der.set([Der.integer(2n), Der.integer(1n)]), "31 06 02 01 01 02 01 02"],
    [
      "SET OF compares whole encodings, length octets included",
      () => Der.set([Der.octetString(Uint8Array.of(1, 0)), Der.octetString(Uint8Array.of(1))]),
      "31 07 04 01 01 04 02 01 00"
    ],
    ["EXPLICIT [0] version", () => Der.explicit(0, Der.integer(2n)), "a0 03 02 01 02"],
    ["EXPLICIT [3] extensions", () => Der.explicit(3, Der.sequence([])), "a3 02 30 00"],
    ["IMPLICIT [2] dNSName", () => Der.implicit(2, Buffer.from("localhost", "ascii")), "82 09" + asciiHex("localhost")],
    ["IMPLICIT [7] iPAddress", () => Der.implicit(7, Uint8Array.of(127, 0, 0, 1)), "87 04 7f 00 00 01"],
    ["IMPLICIT constructed [0]", () => Der.implicit(0, new Uint8Array(0), true), "a0 00"],
    ["high tag number 31", () => Der.implicit(31, Uint8Array.of(0)), "9f 1f 01 00"],
    ["high tag number 200", () => Der.implicit(200, new Uint8Array(0)), "9f 81 48 00"]
  ])
})
