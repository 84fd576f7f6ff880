// The values read with ${file:...} in this process, so that no message can print one: a problem
// about a key echoes its value at times (`"10.0.0.0/33": the prefix ...`, `host:7575 has no scheme`),
// and the value of a key read from a file is a secret whatever the key (docs/security.md).
const secrets = new Set<string>();
/** The same, longest first: a secret that contains another is replaced whole. */
let longestFirst: readonly string[] = [];

export const FILE_SECRET_MARK = '(a value read with ${file:...})';

/** Remembers a value read from a file for the life of the process. */
export function rememberFileSecret(value: string): void {
  if (value === '' || secrets.has(value)) return;
  secrets.add(value);
  longestFirst = [...secrets].sort((a, b) => b.length - a.length);
}

/** `text` with every value read from a file replaced by a mark. */
export function withoutFileSecrets(text: string): string {
  let scrubbed = text;
  for (const secret of longestFirst)
    if (scrubbed.includes(secret)) scrubbed = scrubbed.split(secret).join(FILE_SECRET_MARK);
  return scrubbed;
}
