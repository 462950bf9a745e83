// @ts-check
/**
 * The one way an action is taken: a modal dialog that says what will happen, asks for a reason
 * (kept in the record's history and the audit log), and only then lets the operator go ahead.
 */
import { h, replace } from './dom.js';

/** @import { Child } from './types.js' */

/**
 * @typedef {object} ConfirmOptions
 * @property {string} title
 * @property {Child} [intro]
 * @property {Child | ((choice: string | undefined) => Child)} effect
 * @property {readonly { value: string, label: string }[]} [choices]
 * @property {string} confirmLabel
 * @property {number} [typedCount] The operator must type this number to go ahead (a bulk action over many records).
 * @property {{ legend: string, hint: string, options: readonly { value: string, label: string }[] }} [picks]
 *   Boxes the operator must tick, every one, to go ahead (the merchants a bulk reverse spans); none is ticked for them.
 */

/**
 * Opens the dialog and answers `{ reason, choice }` when confirmed, `undefined` when cancelled.
 *
 * options:
 * - `title`: the dialog's heading, e.g. "Retry generic:A-1001".
 * - `intro`: what the operator should read before choosing (nodes; e.g. what the loyalty history shows).
 * - `effect`: what will happen (text or nodes), or, with `choices`, a function of the choice
 *   (`undefined` until one is chosen).
 * - `choices`: `[{ value, label }]` the operator must pick one of (a resolve's outcome). None is
 *   picked for them: the outcome is what the person established, never a default.
 * - `confirmLabel`: the button that does it, e.g. "Retry".
 * - `typedCount`: a number the operator types to go ahead, so that a click alone never acts on many records.
 * - `picks`: boxes the operator ticks, each one, to go ahead; the answer's `picked` lists them.
 *
 * @param {ConfirmOptions} options
 * @returns {Promise<{ reason: string, choice: string | undefined, picked: string[] } | undefined>}
 */
export function confirmAction({ title, intro, effect, choices, confirmLabel, typedCount, picks }) {
  const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-title' });
  const effectBox = h('div', { class: 'effect', id: 'confirm-effect' });
  const problem = h('p', { class: 'problem', role: 'alert' });
  const heading = h('h2', { id: 'confirm-title', tabindex: '-1' }, title);
  // Checked here rather than with `required`, so the message is the console's own and is announced.
  const reason = h('textarea', { id: 'confirm-reason', name: 'reason', rows: '3', maxlength: '500', 'aria-required': 'true', 'aria-describedby': 'confirm-reason-hint' });
  /** @type {HTMLInputElement[]} */
  const radios = [];
  const choiceInputs = (choices ?? []).map((choice) => {
    const radio = h('input', { type: 'radio', name: 'choice', value: choice.value, onchange: () => choiceChanged() });
    radios.push(radio);
    return h('label', { class: 'choice' }, radio, ` ${choice.label}`);
  });
  const outcomeGroup = choiceInputs.length ? h('fieldset', { class: 'outcomes', 'aria-describedby': 'confirm-outcome-hint' }, h('legend', {}, 'Outcome'), h('p', { class: 'hint', id: 'confirm-outcome-hint' }, 'None is chosen for you: pick what you established.'), choiceInputs) : null;
  const typed = typedCount === undefined ? null : h('input', { id: 'confirm-count', name: 'count', inputmode: 'numeric', autocomplete: 'off', 'aria-required': 'true', 'aria-describedby': 'confirm-count-hint' });
  const typedGroup = typed
    ? h('div', { class: 'field' }, h('label', { for: 'confirm-count' }, 'Number of records'), h('p', { class: 'hint', id: 'confirm-count-hint' }, `Type ${typedCount} to confirm that this acts on ${typedCount} records.`), typed)
    : null;
  /** @type {HTMLInputElement[]} */
  const boxes = [];
  const pickGroup = picks
    ? h(
        'fieldset',
        { class: 'picks', 'aria-describedby': 'confirm-picks-hint' },
        h('legend', {}, picks.legend),
        h('p', { class: 'hint', id: 'confirm-picks-hint' }, picks.hint),
        picks.options.map((option) => {
          const box = h('input', { type: 'checkbox', name: 'pick', value: option.value });
          boxes.push(box);
          return h('label', { class: 'choice' }, box, ` ${option.label}`);
        }),
      )
    : null;
  reason.addEventListener('input', () => {
    problem.textContent = '';
    reason.removeAttribute('aria-invalid');
  });
  const chosen = () => radios.find((radio) => radio.checked)?.value;
  const showEffect = () => replace(effectBox, h('h3', {}, 'What will happen'), typeof effect === 'function' ? effect(chosen()) : effect);
  const choiceChanged = () => {
    if (problem.dataset.about === 'choice') problem.textContent = '';
    showEffect();
  };

  return new Promise((resolve) => {
    /** @type {{ reason: string, choice: string | undefined, picked: string[] } | undefined} */
    let answer;
    const form = h(
      'form',
      {
        method: 'dialog',
        onsubmit: (event) => {
          event.preventDefault();
          if (choiceInputs.length && !chosen()) {
            problem.textContent = 'Choose an outcome: the one you established in the loyalty service.';
            problem.dataset.about = 'choice';
            radios[0]?.focus();
            return;
          }
          if (picks && boxes.some((box) => !box.checked)) {
            problem.textContent = `${picks.legend}: tick each one to go ahead.`;
            problem.dataset.about = 'picks';
            boxes.find((box) => !box.checked)?.focus();
            return;
          }
          if (typed && typed.value.trim() !== String(typedCount)) {
            problem.textContent = `Type ${typedCount}, the number of records this acts on, to go ahead.`;
            problem.dataset.about = 'count';
            typed.setAttribute('aria-invalid', 'true');
            typed.focus();
            return;
          }
          const text = reason.value.trim();
          if (!text) {
            problem.textContent = 'Give a reason: it is kept with the record and in the audit log.';
            problem.dataset.about = 'reason';
            reason.setAttribute('aria-invalid', 'true');
            reason.focus();
            return;
          }
          answer = { reason: text, choice: chosen(), picked: boxes.filter((box) => box.checked).map((box) => box.value) };
          dialog.close();
        },
      },
      heading,
      intro ? h('div', { class: 'intro' }, intro) : null,
      outcomeGroup,
      effectBox,
      pickGroup,
      typedGroup,
      h('label', { for: 'confirm-reason' }, 'Reason'),
      h('p', { id: 'confirm-reason-hint', class: 'hint' }, 'Required. Kept in the record\u2019s history and in the audit log with your name.'),
      reason,
      problem,
      h(
        'div',
        { class: 'buttons' },
        h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Cancel'),
        h('button', { type: 'submit', class: 'primary' }, confirmLabel),
      ),
    );
    dialog.append(form);
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(answer);
    });
    showEffect();
    document.body.append(dialog);
    dialog.showModal();
    // With a choice to make, the dialog starts at its title, so what it shows is read first and
    // the next Tab reaches the outcomes; without one, at the reason it asks for.
    if (choiceInputs.length) heading.focus();
    else reason.focus();
  });
}
