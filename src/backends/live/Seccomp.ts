/**
 * The seccomp filter every box gets (docs/isolation.md, "Seccomp"): a classic BPF program, handed to bubblewrap with
 * `--seccomp FD`, that refuses with EPERM the system calls untrusted code has no business making — the kernel's
 * administration (modules, kexec, reboot, swap, clocks, accounting, quotas), mounts and namespaces, keyrings, tracing
 * other processes or taking their descriptors (pidfd_getfd), eBPF, perf, userfaultfd, io_uring, handle-based opens —
 * the calls Docker's default profile refuses to a container without capabilities, where the box's namespaces and
 * dropped capabilities are the first wall. A system call of another architecture (32-bit x86 on x86_64) kills the
 * process, and the x32 ABI's are refused: the filter only knows the host's own numbers.
 *
 * Written out by hand (no libseccomp): the program is short, and its shape is the kernel's documented one
 * (Documentation/userspace-api/seccomp_filter.rst).
 */
import { arch } from "node:os"

/**
 * Denied calls by name, with their numbers on x86_64 and on aarch64 (asm-generic); undefined where a call is absent.
 */
const denied: ReadonlyArray<readonly [name: string, x64: number | undefined, arm64: number | undefined]> = [
  ["ptrace", 101, 117],
  ["process_vm_readv", 310, 270],
  ["process_vm_writev", 311, 271],
  ["pidfd_getfd", 438, 438],
  ["add_key", 248, 217],
  ["request_key", 249, 218],
  ["keyctl", 250, 219],
  ["mount", 165, 40],
  ["umount2", 166, 39],
  ["pivot_root", 155, 41],
  ["open_tree", 428, 428],
  ["move_mount", 429, 429],
  ["fsopen", 430, 430],
  ["fsconfig", 431, 431],
  ["fsmount", 432, 432],
  ["fspick", 433, 433],
  ["mount_setattr", 442, 442],
  ["unshare", 272, 97],
  ["setns", 308, 268],
  ["kexec_load", 246, 104],
  ["kexec_file_load", 320, 294],
  ["init_module", 175, 105],
  ["finit_module", 313, 273],
  ["delete_module", 176, 106],
  ["bpf", 321, 280],
  ["perf_event_open", 298, 241],
  ["userfaultfd", 323, 282],
  ["io_uring_setup", 425, 425],
  ["io_uring_enter", 426, 426],
  ["io_uring_register", 427, 427],
  ["swapon", 167, 224],
  ["swapoff", 168, 225],
  ["reboot", 169, 142],
  ["acct", 163, 89],
  ["settimeofday", 164, 170],
  ["clock_settime", 227, 112],
  ["clock_adjtime", 305, 266],
  ["adjtimex", 159, 171],
  ["iopl", 172, undefined],
  ["ioperm", 173, undefined],
  ["open_by_handle_at", 304, 265],
  ["name_to_handle_at", 303, 264],
  ["lookup_dcookie", 212, 18],
  ["quotactl", 179, 60],
  ["syslog", 103, 116],
  ["vhangup", 153, 58],
  ["fanotify_init", 300, 262]
]

/** The calls the filter refuses, by name (docs, tests). */
export const deniedSyscalls: ReadonlyArray<string> = denied.map(([name]) => name)

// linux/audit.h, linux/seccomp.h, linux/filter.h
const auditArch = { x64: 0xc000003e, arm64: 0xc00000b7 } as const
const retKillProcess = 0x80000000
const retAllow = 0x7fff0000
const retErrno = 0x00050000
const eperm = 1
const x32Bit = 0x40000000
const ldAbsWord = 0x20
const jeqK = 0x15
const jgeK = 0x35
const retK = 0x06
/** struct seccomp_data: nr at 0, arch at 4. */
const offset = { nr: 0, arch: 4 } as const

type Instruction = readonly [code: number, jt: number, jf: number, k: number]

/** The filter for `architecture` (node's `os.arch()`), or undefined where nodus knows no system call numbers. */
export const seccompFilter = (architecture: string = arch()): Buffer | undefined => {
  const which = architecture === "x64" ? "x64" : architecture === "arm64" ? "arm64" : undefined
  if (which === undefined) return undefined
  const numbers = denied.flatMap(([, x64, arm64]) => {
    const number = which === "x64" ? x64 : arm64
    return number === undefined ? [] : [number]
  })
  const program: Array<Instruction> = [
    [ldAbsWord, 0, 0, offset.arch],
    [jeqK, 1, 0, auditArch[which]],
    [retK, 0, 0, retKillProcess],
    [ldAbsWord, 0, 0, offset.nr]
  ]
  // Jumps count instructions forward from the next one: every check lands on the errno return at the very end.
  const checks = (which === "x64" ? 1 : 0) + numbers.length
  const toErrno = (index: number) => checks - index
  if (which === "x64") program.push([jgeK, toErrno(0), 0, x32Bit])
  numbers.forEach((number, position) => program.push([jeqK, toErrno(position + (which === "x64" ? 1 : 0)), 0, number]))
  program.push([retK, 0, 0, retAllow], [retK, 0, 0, retErrno | eperm])
  const bytes = Buffer.alloc(program.length * 8)
  program.forEach(([code, jt, jf, k], index) => {
    bytes.writeUInt16LE(code, index * 8)
    bytes.writeUInt8(jt, index * 8 + 2)
    bytes.writeUInt8(jf, index * 8 + 3)
    bytes.writeUInt32LE(k, index * 8 + 4)
  })
  return bytes
}
