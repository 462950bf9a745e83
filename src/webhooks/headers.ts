/**
 * A delivery's headers under the names its adapter reads. Some POSes' own libraries send (and
 * accept) a header under a second name: Shopify's without the `X-` prefix (`shopify-hmac-sha256`,
 * `shopify-topic`, …; docs/pos-systems.md, "Shopify"). The adapter declares those aliases
 * (`WebhookSpec.headerAliases`); here each is read as the name it stands for, before the signature
 * is checked or anything of the delivery is read, so every check sees one name.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { ValidationError } from '../kernel/errors.js';

export interface DeliveryHeaders {
  headers: IncomingHttpHeaders;
  /** Node's raw list (name, value, name, value, …), where repeats are counted. */
  rawHeaders: string[];
}

/**
 * `headers` and `rawHeaders` with every alias renamed to the name it stands for. Both names with the
 * same values are one header (the alias's copies are dropped); with different values the delivery
 * is refused (400 naming the header): which of the two the POS meant cannot be told, and the one
 * the signature covers might not be the one acted on.
 */
export function canonicalHeaders(aliases: Readonly<Record<string, string>> | undefined, delivery: DeliveryHeaders): DeliveryHeaders {
  if (!aliases) return delivery;
  const headers = { ...delivery.headers };
  let rawHeaders = delivery.rawHeaders;
  for (const [alias, name] of Object.entries(aliases)) {
    const aliasValues = rawValues(delivery, alias);
    if (aliasValues.length === 0) continue;
    const nameValues = rawValues(delivery, name);
    if (nameValues.length > 0) {
      const same = aliasValues.length === nameValues.length && aliasValues.every((value, i) => value.trim() === nameValues[i]!.trim());
      // The values are not echoed: one of them may be the signature.
      if (!same) throw ValidationError.field(name, `is also sent as ${alias} with another value: which one the POS meant cannot be told; send one of the two names`);
      rawHeaders = withoutName(rawHeaders, alias);
    } else {
      rawHeaders = renamed(rawHeaders, alias, name);
      headers[name] = headers[alias];
    }
    delete headers[alias];
  }
  return { headers, rawHeaders };
}

/** The values given under `name`, in order; from the raw list when there is one (a replay keeps only the parsed headers). */
function rawValues(delivery: DeliveryHeaders, name: string): string[] {
  if (delivery.rawHeaders.length === 0) {
    const value = delivery.headers[name];
    return value === undefined ? [] : ([] as string[]).concat(value);
  }
  const values: string[] = [];
  for (let i = 0; i < delivery.rawHeaders.length; i += 2) if (delivery.rawHeaders[i]!.toLowerCase() === name) values.push(delivery.rawHeaders[i + 1]!);
  return values;
}

function withoutName(rawHeaders: string[], name: string): string[] {
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() !== name) kept.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  return kept;
}

function renamed(rawHeaders: string[], from: string, to: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) out.push(rawHeaders[i]!.toLowerCase() === from ? to : rawHeaders[i]!, rawHeaders[i + 1]!);
  return out;
}
