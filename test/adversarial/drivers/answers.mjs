// Counting the answers a raw HTTP/1.1 connection reads, by status, without parsing them: the status
// lines are found in the byte stream as it arrives (a line split across two reads included).

/** A counter of status lines in the bytes fed to it. */
export function statusCounter() {
  const counts = {};
  let carry = '';
  return {
    counts,
    /** Feeds the next bytes read. */
    feed(data) {
      const text = carry + data.toString('latin1');
      const pattern = /HTTP\/1\.1 (\d{3}) /g;
      let match;
      let end = 0;
      while ((match = pattern.exec(text)) !== null) {
        counts[match[1]] = (counts[match[1]] ?? 0) + 1;
        end = pattern.lastIndex;
      }
      // A status line may be cut at the end of this read: keep the tail that could start one.
      carry = text.slice(Math.max(end, text.length - 12));
    },
    get total() {
      return Object.values(counts).reduce((sum, count) => sum + count, 0);
    },
  };
}

/** Adds `from`'s counts into `into`. */
export function addCounts(into, from) {
  for (const [status, count] of Object.entries(from)) into[status] = (into[status] ?? 0) + count;
  return into;
}
