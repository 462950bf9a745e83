/**
 * The tests' one way of polling until something holds. Where the code under test gives a signal (an
 * event, a promise, a pass counter, an injected clock), a test waits on that instead; this is for the
 * states nothing announces (a row a server's clock releases, a process /proc shows gone, a line a child
 * prints). It has a deadline and fails at it, naming what it waited for and what it saw last, so a
 * wait can never end quietly in a state it did not wait for.
 */

export interface Awaited {
  /** What the wait is for, in the failure's words (without it, the check's source text). */
  what?: string;
  /** More to show when the time is up (a child's output so far, say). */
  context?: () => string;
}

/**
 * Reads `read` every 20 ms until `check` passes and answers the value that passed; when `timeoutMs`
 * have passed, throws with the last value read. A `read` that throws ends the wait with its error
 * (how a wait gives up at once on a process that has exited).
 */
export async function eventually<T>(read: () => Promise<T> | T, check: (value: T) => boolean, timeoutMs = 5000, about: Awaited = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) {
      const context = about.context?.() ?? '';
      throw new Error(`waited ${timeoutMs} ms for ${about.what ?? check.toString()}; the last value read was ${describe(value)}${context ? `\n${context}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

function describe(value: unknown): string {
  try {
    const text = JSON.stringify(value);
    return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
  } catch {
    return String(value);
  }
}
