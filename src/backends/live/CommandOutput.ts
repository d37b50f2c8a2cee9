/**
 * The output of a box's commands, as the agent keeps it for log reads and foreground answers (BoxChannel.ts), bounded
 * three ways (docs/sandboxes.md, "Output"): per command (`Limits.sandboxCommandOutputBytesMax`), per box
 * (`Limits.sandboxBoxOutputBytesMax`, all its commands together) and per host (`Limits.sandboxHostOutputBytesMax`,
 * every box its agent runs). Past a bound the oldest bytes under it go first, whichever command wrote them; a
 * command's offsets go on counting, so a reader sees where its output was cut and by how much.
 */

/** A piece of output as it came from the box, on stdout (1) or stderr (2), numbered in the order it came. */
interface Chunk {
  readonly fd: 1 | 2
  readonly data: Buffer
  readonly seq: number
}

/**
 * A bound over the output of a set of commands: a box's, or (with no parent) a host's. Each command's output counts in
 * its box's budget and, through it, in the host's.
 */
export class OutputBudget {
  readonly limit: number
  readonly parent: OutputBudget | undefined
  /** The bytes its commands keep now. */
  held = 0
  /** The outputs it bounds (a host's: every box's). */
  readonly members = new Set<CommandOutput>()
  private seq = 0

  constructor(limit: number, parent?: OutputBudget) {
    this.limit = limit
    this.parent = parent
  }

  /** The next number in the order output comes, shared by every budget under the same host. */
  nextSeq(): number {
    return this.parent === undefined ? this.seq++ : this.parent.nextSeq()
  }

  /** Drops the oldest chunks among its members until it holds no more than its limit. */
  trim() {
    while (this.held > this.limit) {
      let oldest: CommandOutput | undefined
      for (const member of this.members) if (member.oldestSeq() < (oldest?.oldestSeq() ?? Infinity)) oldest = member
      if (oldest === undefined) return
      oldest.dropOldest()
    }
  }
}

/** One command's kept output: its chunks from `base` on, and how many bytes went before them. */
export class CommandOutput {
  private readonly chunks: Array<Chunk> = []
  private readonly commandMax: number
  private readonly budgets: ReadonlyArray<OutputBudget>
  /** The offset of the first byte kept; every byte before it was dropped. */
  base = 0
  /** The bytes kept, from `base` on. */
  kept = 0

  constructor(box: OutputBudget, commandMax: number) {
    this.commandMax = commandMax
    const budgets: Array<OutputBudget> = []
    for (let budget: OutputBudget | undefined = box; budget !== undefined; budget = budget.parent) budgets.push(budget)
    this.budgets = budgets
    for (const budget of budgets) budget.members.add(this)
  }

  /** The offset after the last byte written. */
  get end(): number {
    return this.base + this.kept
  }

  /** Takes a chunk, then makes room under each bound, the command's own first, then its box's, then its host's. */
  append(fd: 1 | 2, data: Buffer) {
    if (data.length === 0) return
    this.chunks.push({ fd, data, seq: this.budgets[0]!.nextSeq() })
    this.kept += data.length
    for (const budget of this.budgets) budget.held += data.length
    while (this.kept > this.commandMax && this.chunks.length > 0) this.dropOldest()
    for (const budget of this.budgets) budget.trim()
  }

  oldestSeq(): number {
    return this.chunks[0]?.seq ?? Infinity
  }

  dropOldest() {
    const dropped = this.chunks.shift()
    if (dropped === undefined) return
    this.kept -= dropped.data.length
    this.base += dropped.data.length
    for (const budget of this.budgets) budget.held -= dropped.data.length
  }

  /** Up to `max` bytes from `offset` (or from `base`, if that was dropped), and the offset they start at. */
  read(offset: number, max: number): { readonly from: number; readonly data: Buffer } {
    const from = Math.max(offset, this.base)
    const parts: Array<Buffer> = []
    let at = this.base
    let taken = 0
    for (const chunk of this.chunks) {
      if (taken >= max) break
      const next = at + chunk.data.length
      if (next > from) {
        const piece = chunk.data.subarray(Math.max(0, from - at), Math.max(0, from - at) + max - taken)
        parts.push(piece)
        taken += piece.length
      }
      at = next
    }
    return { from, data: Buffer.concat(parts) }
  }

  /** The last `max` bytes kept of one stream, and whether any of that stream's bytes are not in them. */
  tail(fd: 1 | 2, max: number): { readonly data: Buffer; readonly cut: boolean } {
    const parts: Array<Buffer> = []
    let taken = 0
    let cut = false
    for (let index = this.chunks.length - 1; index >= 0; index--) {
      const chunk = this.chunks[index]!
      if (chunk.fd !== fd) continue
      if (taken >= max) {
        cut = true
        break
      }
      const piece = chunk.data.subarray(Math.max(0, chunk.data.length - (max - taken)))
      if (piece.length < chunk.data.length) cut = true
      parts.unshift(piece)
      taken += piece.length
    }
    const data = Buffer.concat(parts)
    // A cut start may split a UTF-8 character: its continuation bytes go, so the text starts at a whole one.
    let start = 0
    if (cut) { while (start < data.length && start < 3 && (data[start]! & 0xc0) === 0x80) start++ }
    return { data: data.subarray(start), cut }
  }

  /** Lets go of everything it keeps (its command is forgotten, or its box ended). */
  release() {
    while (this.chunks.length > 0) this.dropOldest()
    for (const budget of this.budgets) budget.members.delete(this)
  }
}
