/**
 * The one way an action is taken: a modal dialog that says what will happen, asks for a reason
 * (kept in the record's history and the audit log), and only then lets the operator go ahead.
 */
import { h, replace } from './dom.js';

/**
 * Opens the dialog and answers `{ reason, choice }` when confirmed, `undefined` when cancelled.
 *
 * options:
 * - `title`: the dialog's heading, e.g. "Retry generic:A-1001".
 * - `effect`: what will happen (text or nodes), or, with `choices`, a function of the choice.
 * - `choices`: `[{ value, label }]` the operator must pick one of (a resolve's outcome).
 * - `confirmLabel`: the button that does it, e.g. "Retry".
 */
export function confirmAction({ title, effect, choices, confirmLabel }) {
  const dialog = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-title' });
  const effectBox = h('div', { class: 'effect', id: 'confirm-effect' });
  const problem = h('p', { class: 'problem', role: 'alert' });
  // Checked here rather than with `required`, so the message is the console's own and is announced.
  const reason = h('textarea', { id: 'confirm-reason', name: 'reason', rows: '3', maxlength: '500', 'aria-required': 'true', 'aria-describedby': 'confirm-reason-hint' });
  const choiceInputs = (choices ?? []).map((choice, i) =>
    h(
      'label',
      { class: 'choice' },
      h('input', { type: 'radio', name: 'choice', value: choice.value, checked: i === 0 ? true : undefined, onchange: () => showEffect() }),
      ` ${choice.label}`,
    ),
  );
  reason.addEventListener('input', () => {
    problem.textContent = '';
    reason.removeAttribute('aria-invalid');
  });
  const chosen = () => dialog.querySelector('input[name="choice"]:checked')?.value;
  const showEffect = () => replace(effectBox, h('h3', {}, 'What will happen'), typeof effect === 'function' ? effect(chosen()) : effect);

  return new Promise((resolve) => {
    let answer;
    const form = h(
      'form',
      {
        method: 'dialog',
        onsubmit: (event) => {
          event.preventDefault();
          const text = reason.value.trim();
          if (!text) {
            problem.textContent = 'Give a reason: it is kept with the record and in the audit log.';
            reason.setAttribute('aria-invalid', 'true');
            reason.focus();
            return;
          }
          answer = { reason: text, choice: chosen() };
          dialog.close();
        },
      },
      h('h2', { id: 'confirm-title' }, title),
      choiceInputs.length ? h('fieldset', {}, h('legend', {}, 'Outcome'), choiceInputs) : null,
      effectBox,
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
    reason.focus();
  });
}
