/**
 * A loyalty service whose answers the test gives, for suites that drive the core without HTTP: each
 * accrue or reverse is kept with the function that answers it, or answered at once by `answer`
 * where one is given. The HTTP suites use the simulator (simulator/), the model check its own
 * books (model-check/fake-loyalty.ts); this is the third and last stand-in.
 */
import type { PosCalls } from '../../src/core/delivery.js';
import type { CallReport } from '../../src/loyalty/client.js';
import type { AccrueRequest } from '../../src/loyalty/contract.js';

export interface ScriptedCall {
  operation: 'accrue' | 'reverse';
  transactionId: string;
  answer: (report: CallReport) => void;
}

export class ScriptedLoyalty implements PosCalls {
  readonly calls: ScriptedCall[] = [];
  /** Calls not answered yet, and the most there ever were at once. */
  out = 0;
  mostOut = 0;
  #waiters: (() => void)[] = [];

  /** `answer`: the report every call gets at once (its argument counts the calls, from 1); without it, each waits for the test. A test may set it later. */
  constructor(public answer?: (n: number) => CallReport) {}

  accrue(body: AccrueRequest): Promise<CallReport> {
    return this.#call('accrue', body.transactionId);
  }

  reverse(body: { transactionId: string }): Promise<CallReport> {
    return this.#call('reverse', body.transactionId);
  }

  /** Resolves once `count` calls have been made in all; throws, saying how many were, if they are not made within `timeoutMs`. */
  async made(count: number, timeoutMs = 2000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.calls.length < count) {
      if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${count} calls: ${this.calls.length} were made, ${this.out} of them unanswered`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  #call(operation: 'accrue' | 'reverse', transactionId: string): Promise<CallReport> {
    this.mostOut = Math.max(this.mostOut, ++this.out);
    return new Promise<CallReport>((resolve) => {
      this.calls.push({ operation, transactionId, answer: resolve });
      for (const wake of this.#waiters.splice(0)) wake();
      if (this.answer) resolve(this.answer(this.calls.length));
    }).finally(() => this.out--);
  }
}
