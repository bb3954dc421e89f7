import { describeValue, RateLimitError } from './errors.js';

/**
 * Throws `invalid_option` when an options object has an own key that `accepted` lacks: JavaScript ignores a
 * misspelt option without a word (`plan` for `plans` would keep the spec's plans). The message names each unknown key,
 * the accepted key it most likely meant, if one is close, and every accepted key. `what` names the factory. Factories
 * call it once, where they read their options; never per call.
 *
 * `accepted` is a record of every key of the options type, `{ store: true, ... } satisfies Record<keyof
 * LimiterOptions, true>`, kept next to the type, so that TypeScript refuses a list that has drifted from it.
 *
 * With `code` `'invalid_argument'` it checks a per-call argument instead (a request, an identity), and its message
 * says "key" for "option": `ratecard: the request has an unknown key "limit"; did you mean "limits"? It takes
 * …`. It enumerates the keys and allocates, so a decision path calls it only once a cheaper check has found an
 * unknown key, for the message.
 */
export function checkOptionKeys(
  options: object,
  accepted: Readonly<Record<string, true>>,
  what: string,
  code: 'invalid_option' | 'invalid_argument' = 'invalid_option',
): void {
  const unknown = Object.keys(options).filter((key) => !Object.hasOwn(accepted, key));
  if (unknown.length === 0) return;
  const names = Object.keys(accepted);
  const takes = `takes ${names.join(', ')}`;
  const [got, noun] = code === 'invalid_option' ? ['got', 'option'] : ['has', 'key'];
  let message: string;
  if (unknown.length === 1) {
    const key = unknown[0] as string;
    const meant = closest(key, names);
    const hint = meant === undefined ? `it ${takes}` : `did you mean ${JSON.stringify(meant)}? It ${takes}`;
    message = `${what} ${got} an unknown ${noun} ${quoted(key)}; ${hint}`;
  } else {
    const listed = unknown.map((key) => {
      const meant = closest(key, names);
      return meant === undefined ? quoted(key) : `${quoted(key)} (did you mean ${JSON.stringify(meant)}?)`;
    });
    message = `${what} ${got} unknown ${noun}s ${listed.join(', ')}; it ${takes}`;
  }
  throw new RateLimitError(code, `ratecard: ${message}`);
}

/** A key as the message shows it: quoted, or cut short by describeValue when it is long. */
function quoted(key: string): string {
  return key.length <= 40 ? JSON.stringify(key) : describeValue(key);
}

/**
 * The accepted name a key most likely meant: the same but for case (`maxwait`), or within one edit of it (`plan`,
 * `brust`) for a key of up to 4 characters, two (`storeTimeout` for `storeTimeoutMs`) for a longer one. A short key
 * gets one edit only, or `log` would suggest `now`. Ties go to the name listed first.
 */
function closest(key: string, names: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = lower.length <= 4 ? 1 : 2;
  for (const name of names) {
    // The distance is at least the difference in length: a long key (a hostile one) costs nothing here.
    if (Math.abs(name.length - lower.length) > bestDistance) continue;
    const distance = editDistance(lower, name.toLowerCase());
    if (distance < bestDistance || (best === undefined && distance === bestDistance)) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`: the optimal string alignment
 * distance, so that `brust` is one edit from `burst`, as a typist sees it.
 */
function editDistance(a: string, b: string): number {
  // Rows of the dynamic-programming table: the one before the previous, the previous, the current.
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const replace = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      let cost = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, replace);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        cost = Math.min(cost, (before[j - 2] as number) + 1);
      }
      current.push(cost);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length] as number;
}
