/** The seccomp filter's program (the box applies it: test/backends/live/LiveBox.test.ts checks it in force). */
import { describe, expect, it } from "vitest"
import { deniedSyscalls, seccompFilter } from "../../../src/backends/live/Seccomp.ts"

const instructions = (filter: Buffer) =>
  Array.from({ length: filter.length / 8 }, (_, index) => ({
    code: filter.readUInt16LE(index * 8),
    jt: filter.readUInt8(index * 8 + 2),
    jf: filter.readUInt8(index * 8 + 3),
    k: filter.readUInt32LE(index * 8 + 4)
  }))

describe("the seccomp filter", () => {
  it("checks the architecture, then refuses each denied call with EPERM and allows the rest (x86_64)", () => {
    const program = instructions(seccompFilter("x64")!)
    expect(program[0]).toEqual({ code: 0x20, jt: 0, jf: 0, k: 4 })
    expect(program[1]).toEqual({ code: 0x15, jt: 1, jf: 0, k: 0xc000003e })
    expect(program[2]).toEqual({ code: 0x06, jt: 0, jf: 0, k: 0x80000000 })
    const errno = program.length - 1
    expect(program[errno]).toEqual({ code: 0x06, jt: 0, jf: 0, k: 0x00050001 })
    expect(program[errno - 1]).toEqual({ code: 0x06, jt: 0, jf: 0, k: 0x7fff0000 })
    // Every check jumps to the errno return: keyctl (250) among them, and the x32 ABI.
    const checks = program.slice(4, errno - 1)
    for (const [index, check] of checks.entries()) expect(4 + index + 1 + check.jt).toBe(errno)
    expect(checks.map((check) => check.k)).toContain(250)
    expect(checks[0]).toMatchObject({ code: 0x35, k: 0x40000000 })
    expect(checks.length).toBe(deniedSyscalls.length + 1)
  })

  it("has aarch64's numbers, without the calls it lacks, and none for an architecture it does not know", () => {
    const program = instructions(seccompFilter("arm64")!)
    expect(program[1]!.k).toBe(0xc00000b7)
    // iopl and ioperm do not exist there.
    expect(program.length).toBe(4 + deniedSyscalls.length - 2 + 2)
    expect(program.map((instruction) => instruction.k)).toContain(219)
    expect(seccompFilter("riscv64")).toBeUndefined()
  })
})
