/**
 * What the client reports of its calls to the loyalty service, as types only: the ledger keeps
 * them on each record (every attempt with what was sent and what came back), so it imports these
 * shapes from here and never the client itself.
 */

export type UpstreamOperation = 'accrue' | 'reverse';

/** One HTTP request to the loyalty service: what was sent, what came back, when. */
export interface Attempt {
  operation: UpstreamOperation;
  startedAt: string;
  finishedAt: string;
  request: unknown;
  /** Absent when no answer came (network error, timeout). Non-JSON bodies are kept as truncated text. */
  response?: { status: number; body: unknown };
  error?: string;
}
