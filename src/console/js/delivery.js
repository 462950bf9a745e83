// @ts-check
/**
 * What a POS delivered, as the API keeps it: a dead letter's delivery, or the payload that created a
 * record. Shown masked (customers' phone numbers and emails replaced, a base64 body withheld), as
 * the API gives it; a person may ask for it in clear, which the API records in the audit log.
 */
import { h, replace, table } from './dom.js';

/** @import { Delivery } from './types.js' */

/**
 * A box showing `shown` (`{ headers?, body, bodyEncoding, masked }`) and, while masked, a button
 * that asks `unmask()` for it in clear and shows that instead.
 *
 * options:
 * - `id`: a prefix for the ids the box uses (two boxes on one page stay apart).
 * - `buttonLabel`: the unmasking button's name.
 * - `headersCaption`: the headers table's caption (no table when there are no headers).
 * - `onError(error)`: what to do when unmasking fails.
 *
 * @param {Delivery} shown
 * @param {() => Promise<Delivery>} unmask
 * @param {{ id: string, buttonLabel: string, headersCaption?: string, onError?: (error: unknown) => void }} options
 * @returns {HTMLDivElement}
 */
export function deliveryBox(shown, unmask, { id, buttonLabel, headersCaption = 'Headers the bridge reads', onError }) {
  const box = h('div', { class: 'delivery' });
  const show = (/** @type {Delivery} */ delivery) => {
    const heading = h('h3', {}, `Body (${delivery.bodyEncoding ?? 'utf8'}${delivery.masked ? '; customers\u2019 phone numbers and emails masked' : ''})`);
    const text = delivery.masked && delivery.bodyEncoding === 'base64' ? 'Withheld while masked: a base64 body cannot be searched for contact details.' : prettyBody(delivery);
    const unmaskButton = delivery.masked
      ? h(
          'p',
          {},
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              'aria-describedby': `${id}-unmask-hint`,
              onclick: async () => {
                try {
                  show(await unmask());
                } catch (error) {
                  onError?.(error);
                }
              },
            },
            buttonLabel,
          ),
          h('span', { class: 'hint', id: `${id}-unmask-hint` }, ' Recorded in the audit log with your name.'),
        )
      : null;
    const headers = delivery.headers && Object.keys(delivery.headers).length ? table(headersCaption, ['Header', 'Value'], Object.entries(delivery.headers).map(([k, v]) => [k, String(v)])) : null;
    replace(box, headers, heading, unmaskButton, h('pre', { class: 'json', tabindex: '0' }, text));
  };
  show(shown);
  return box;
}

/**
 * @param {Delivery} delivery
 * @returns {string}
 */
function prettyBody(delivery) {
  const body = delivery.body ?? '';
  if (delivery.bodyEncoding === 'base64') return body;
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}
