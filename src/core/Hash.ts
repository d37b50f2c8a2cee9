/** Small deterministic hashes for the pure core, which has no node:crypto (I/O-free, the same on every host). */

/** FNV-1a, 32 bits, as 8 hex digits: a tiny deterministic hash, for names and for telling two texts apart. */
export const fnv1a32 = (text: string): string => {
  let hash = 0x811c9dc5
  for (let index = 0; index < text.length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193) >>> 0
  return hash.toString(16).padStart(8, "0")
}
